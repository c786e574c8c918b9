/* The exit statuses of spk: the program, its commands, the experiments and
 * the tools (spk.options.EXIT reads them through spk.core, so each is
 * defined here once). README and `spk help` list them. */
#ifndef SPK_EXIT_STATUS_H
#define SPK_EXIT_STATUS_H

enum {
    SPK_EXIT_OK = 0,     /* done (a result beyond its bound is a result: its own status is the script's) */
    SPK_EXIT_ERROR = 1,  /* an error: what failed is on stderr */
    SPK_EXIT_USAGE = 2,  /* bad arguments: the usage is on stderr */
    SPK_EXIT_NO_GPU = 3, /* the work needs a CUDA GPU and there is none: nothing was run */
};

#endif

/* Kernel options as data. A kernel family (the cluster recurrence, the
 * persistent recurrence) describes each option a script may give in its
 * `kernel` table once, in a table of spk_kernel_option: the Lua name, the
 * values it takes (words or integers), the macro of the kernel source it
 * sets, where a value left out comes from, and one line of help; and the
 * options' dependencies once, as rules with their messages. Everything else
 * derives from that table: the bindings read a kernel table through it, the
 * checks and their messages come from it, the NVRTC defines and plan.kernel
 * are written from it, and `spk help` prints it. docs/design.md shows how a
 * new option is added.
 *
 * Values live in the family's variant struct (one int per option, at the
 * option's offset); a word option holds the index of its word.
 * Conventions as in core/tensor.h: -1 on failure with spk_last_error(). */
#ifndef SPK_LSTM_KERNEL_OPTIONS_H
#define SPK_LSTM_KERNEL_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/runtime.h"

#define SPK_KERNEL_OPTIONS_MAX 16 /* the most options a family has (each family checks its count) */
#define SPK_OPTION_WORDS 4

/* Where the value of an option left out comes from. */
typedef enum spk_option_default {
    /* the layers' own size (the hidden size) */
    SPK_DEFAULT_LAYERS,
    /* the batch's row of the backend's default table; where the row's value
     * breaks a rule together with an option the script gave, the option's
     * fallback, else the first of its values that breaks none */
    SPK_DEFAULT_BATCH,
    /* the batch's row while every option it follows has the row's value;
     * otherwise computed from them by the backend's fit (a derived size) */
    SPK_DEFAULT_FIT,
} spk_option_default;

typedef struct spk_kernel_option {
    const char *name;                          /* the kernel table's key: kernel.push */
    const char *macro;                         /* the define it sets; NULL: none (it picks the source) */
    const char *words[SPK_OPTION_WORDS + 1];   /* a word option's values (value i is words[i]); {NULL}: integer */
    int min, max;                              /* an integer option's range */
    uint64_t allowed;                          /* integers: bit v set for each allowed v < 64; 0: all of min..max */
    spk_option_default from;                   /* where a value left out comes from */
    int fallback;                              /* SPK_DEFAULT_BATCH: the value tried after the row's */
    unsigned follows;                          /* SPK_DEFAULT_FIT: bit i for each option i it depends on */
    size_t offset;                             /* of its int in the variant struct */
    const char *help;                          /* what it does, one line */
} spk_kernel_option;

/* When `option` has one of the values `when` (bit v: value v, or word v),
 * `other` must have one of `needs`; else `message` is the error. */
typedef struct spk_kernel_rule {
    const char *option;
    uint64_t when;
    const char *other;
    uint64_t needs;
    const char *message;
} spk_kernel_rule;

#define SPK_BIT(v) ((uint64_t)1 << (v))

typedef struct spk_kernel_family {
    const char *backend; /* "cluster", "persistent" */
    const spk_kernel_option *options;
    int count;
    const spk_kernel_rule *rules;
    int nrules;
} spk_kernel_family;

/* The options a script gave: values[i] for each option i whose bit is set. */
typedef struct spk_kernel_choice {
    unsigned given;
    int values[SPK_KERNEL_OPTIONS_MAX];
} spk_kernel_choice;

/* The index of option `name`, or -1 with "kernel: unknown option 'x' (known:
 * hidden, push, cluster, ...)", the message every unknown option gets. */
int spk_kernel_option_index(const spk_kernel_family *f, const char *name);
/* Records a value the script gave, checked against the option's values
 * ("kernel.gate_block must be 1 or 4, got 2"; a word option named with an
 * integer, or an integer option with a word, is refused the same way). */
int spk_kernel_choice_set_int(const spk_kernel_family *f, spk_kernel_choice *c, int option, long long value);
int spk_kernel_choice_set_word(const spk_kernel_family *f, spk_kernel_choice *c, int option, const char *word);
/* The message of a value an option does not take ("got table"); returns -1. */
int spk_kernel_option_refuse(const spk_kernel_option *o, const char *got);

/* The value of option i in a variant, and setting it. */
int spk_kernel_option_get(const spk_kernel_option *o, const void *variant);
void spk_kernel_option_set(const spk_kernel_option *o, void *variant, int value);
/* The word of a word option's value (NULL for an integer option). */
const char *spk_kernel_option_word(const spk_kernel_option *o, int value);

/* The variant a plan compiles from the row of its batch and what the script
 * gave, by each option's default rule; SPK_DEFAULT_FIT options that do not
 * keep the row's value are left 0 for the backend's fit, and hidden is the
 * row's (the layers'). Checks nothing (spk_kernel_check_rules does). */
void spk_kernel_resolve(const spk_kernel_family *f, const void *row, const spk_kernel_choice *given,
                        void *out);
/* Every value within its option's range and every rule kept (the first
 * broken one's message). */
int spk_kernel_check_rules(const spk_kernel_family *f, const void *variant);

/* The defines of a variant, one per option with a macro: out[i] and text[i]
 * (its value). Returns how many. */
int spk_kernel_defines(const spk_kernel_family *f, const void *variant, spk_define *out,
                       char text[][16]);

/* "\"scalar\", \"direct\" or \"warp\"", "1, 2, 4, 8 or 16", "1 .. 32": the
 * values an option takes, as its messages and help print them. */
void spk_kernel_option_values(const spk_kernel_option *o, char *out, size_t size);
/* The option list of a family as `spk help` prints it, one option a line
 * ("  push         \"scalar\", \"direct\" or \"warp\"   how h reaches ..."),
 * then the rules' messages. Returns the length written (snprintf's). */
int spk_kernel_family_describe(const spk_kernel_family *f, char *out, size_t size);

#endif

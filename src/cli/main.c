/* The spk program: a Lua 5.4 interpreter with the spk module built in.
 *
 *   spk [options] [script [args...]]     as lua(1): -e, -l, -i, -v, -h, --, -
 *                                        (-e statements see the globals spk and help)
 *   spk run script [args...]             the same as `spk script [args...]`
 *   spk repl                             the interactive session (repl.c)
 *   spk <command> [args...]              a command written in Lua: the module
 *                                        spk.cli.<command> (lua/spk/cli/), which
 *                                        returns function(args) -> exit status
 *
 * Argument handling, `arg`, error reports and Ctrl-C follow lua.c, so scripts
 * behave as they do under lua5.4. */
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h> /* CUDART_VERSION: the toolkit spk is built with */
#include <lauxlib.h>
#include <lua.h>

#include "lua/bind.h"
#include <lualib.h>

#include "cli/cli.h"
#include "core/cancel.h"
#include "core/paths.h"
#include "core/file.h"
#include "build_info.h" /* SPK_COMMIT, SPK_DIRTY (scripts/build_info.sh) */
#include "core/version.h"
#include "lstm/family.h"

int luaopen_spk_core(lua_State *L);
int luaopen_spk(lua_State *L);

static const char *progname = "spk";

/* The program's arguments, for spk.program.argv (the provenance of results). */
static int program_argc;
static char **program_argv;

/* ---- running Lua code (shared with repl.c) ---------------------------- */

/* The state a Ctrl-C interrupts. Signal handlers cannot take arguments. */
static lua_State *running_state = NULL;

/* Raises "interrupted" at the next hook event, as lua.c does: the handler
 * itself only arms a hook, since it may run at any point inside Lua. */
static void stop_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted");
}

/* Ctrl-C: Lua code stops at its next instruction (the hook), C code at its
 * next poll of the core's cancellation flag (core/cancel.h), which fails the
 * call with "interrupted". Both are async-signal-safe. */
static void on_interrupt(int sig)
{
    signal(sig, SIG_DFL); /* a second Ctrl-C before the first took effect kills the process */
    spk_cancel_request();
    lua_sethook(running_state, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

static const char *error_text(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        /* metamethods wanted: the error object's own text, as lua.c prints it; nothing is held */
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            return lua_tostring(L, -1);
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    return msg;
}

static int message_with_traceback(lua_State *L)
{
    luaL_traceback(L, L, error_text(L), 1);
    return 1;
}

static int message_only(lua_State *L)
{
    lua_pushstring(L, error_text(L));
    return 1;
}

int spk_cli_docall(lua_State *L, int narg, int nres, int traceback)
{
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, traceback ? message_with_traceback : message_only);
    lua_insert(L, base);
    lua_State *outer = running_state;
    if (outer == NULL)
        spk_cancel_reset(); /* an interrupt ends the call it came in, not the next one */
    running_state = L;
    void (*old)(int) = signal(SIGINT, on_interrupt);
    int status = lua_pcall(L, narg, nres, base);
    signal(SIGINT, old);
    running_state = outer;
    if (outer == NULL)
        spk_cancel_reset();
    lua_remove(L, base);
    return status;
}

int spk_cli_report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        fprintf(stderr, "%s: %s\n", progname, msg ? msg : "(error object is not a string)");
        fflush(stderr);
        lua_pop(L, 1);
    }
    return status;
}

/* ---- the spk modules and the commands folder --------------------------- */

/* package.loaded["spk.program"]: facts only the program knows, and one
 * hook: a function set as on_failure is called with the message when a
 * script fails, before the message is printed; a string it returns is
 * printed instead (spk.experiment: the message without the traceback, after
 * removing what the experiment wrote). */
static int open_program_info(lua_State *L)
{
    lua_createtable(L, 0, 6);
    lua_pushstring(L, SPK_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushstring(L, SPK_COMMIT);
    lua_setfield(L, -2, "commit");
    lua_createtable(L, program_argc, 0);
    for (int i = 0; i < program_argc; i++) {
        lua_pushstring(L, program_argv[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "argv");
    lua_pushstring(L, LUA_RELEASE);
    lua_setfield(L, -2, "lua_release");
    lua_pushinteger(L, CUDART_VERSION);
    lua_setfield(L, -2, "cuda_toolkit_version");
    return 1;
}

static void preload(lua_State *L)
{
    spk_lua_rawfield(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE); /* made by luaL_openlibs */
    lua_pushcfunction(L, luaopen_spk);
    lua_setfield(L, -2, "spk");
    lua_pushcfunction(L, luaopen_spk_core);
    lua_setfield(L, -2, "spk.core");
    lua_pushcfunction(L, open_program_info);
    lua_setfield(L, -2, "spk.program");
    lua_pop(L, 1);
}

static int require_core_lua_dir(lua_State *L)
{
    spk_lua_rawglobal(L, "require");
    lua_pushstring(L, "spk.core");
    lua_call(L, 1, 1);
    spk_lua_rawfield(L, -1, "lua_dir");
    return 1;
}

/* The folder holding spk/ (spk.core.lua_dir), copied into out; 0 if unknown. */
static int find_lua_dir(lua_State *L, char *out, size_t size)
{
    lua_pushcfunction(L, require_core_lua_dir);
    int ok = lua_pcall(L, 0, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING;
    if (ok)
        snprintf(out, size, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return ok;
}

/* Puts lua/ first on package.path, so spk.cli.<command> is found. */
static void add_lua_dir_to_path(lua_State *L, const char *dir)
{
    spk_lua_rawglobal(L, "package");
    spk_lua_rawfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
}

/* A command name: a plain lower-case word, so it maps to one file. */
static int is_command_word(const char *s)
{
    if (!(*s >= 'a' && *s <= 'z'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static int is_lua_command(lua_State *L, const char *name)
{
    char dir[PATH_MAX], file[PATH_MAX + 64];
    if (!is_command_word(name) || !find_lua_dir(L, dir, sizeof dir))
        return 0;
    snprintf(file, sizeof file, "%s/spk/cli/%s.lua", dir, name);
    return access(file, R_OK) == 0;
}

/* A command's summary: the first line of its file when it is "-- text". */
static void read_summary(const char *file, char *out, size_t size)
{
    out[0] = '\0';
    FILE *f = spk_file_fopen(file, NULL); /* never blocks on a FIFO there */
    if (!f)
        return;
    char line[256];
    if (fgets(line, sizeof line, f) && strncmp(line, "-- ", 3) == 0) {
        line[strcspn(line, "\r\n")] = '\0';
        snprintf(out, size, "%s", line + 3);
    }
    fclose(f);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the commands found in lua/spk/cli/, sorted, with their summaries. */
static void print_lua_commands(lua_State *L, FILE *out)
{
    char dir[PATH_MAX], folder[PATH_MAX + 16];
    if (!find_lua_dir(L, dir, sizeof dir))
        return;
    snprintf(folder, sizeof folder, "%s/spk/cli", dir);
    DIR *d = opendir(folder);
    if (!d)
        return;
    char *names[64];
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && count < sizeof names / sizeof *names) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".lua") != 0)
            continue;
        char *name = strndup(e->d_name, len - 4);
        if (name && is_command_word(name))
            names[count++] = name;
        else
            free(name);
    }
    closedir(d);
    qsort(names, count, sizeof *names, compare_names);
    for (size_t i = 0; i < count; i++) {
        char file[PATH_MAX + 64], summary[256];
        snprintf(file, sizeof file, "%s/%s.lua", folder, names[i]);
        read_summary(file, summary, sizeof summary);
        fprintf(out, "  %-22s %s\n", names[i], summary);
        free(names[i]);
    }
}

/* The kernel options of the backends that have them, from their option
 * tables (README's "Kernel options" shows the same text). */
static void print_kernel_options(FILE *out)
{
    fprintf(out, "\nkernel options (spk.lstm.stack{backend = ..., kernel = {option = value, ...}}):\n");
    for (int i = 0; spk_families[i]; i++) {
        char text[4096];
        spk_kernel_family_describe(spk_families[i]->options, text, sizeof text);
        fprintf(out, "backend %s:\n%s", spk_families[i]->backend, text);
    }
}

/* The help of the commands written in C: `spk run --help`, `spk help repl`. */
static const char run_help[] =
    "usage: spk run SCRIPT [args...]     (also: spk SCRIPT [args...])\n"
    "\n"
    "Runs the Lua script SCRIPT with spk loaded (require \"spk\"), its arguments as ... and in the\n"
    "global arg, as lua5.4 does. SCRIPT is a file, - for standard input, or one of the experiments/\n"
    "and tools/ scripts spk ships (spk run experiments/quickstart.lua works from any folder; a file of\n"
    "that name below the current folder comes first). Every experiment and tool answers --help\n"
    "(spk run experiments/tile_sweep.lua --help), with no device needed.\n"
    "\n"
    "An error prints spk: <message> and a traceback and exits 1 (an experiment prints the message\n"
    "alone and removes what it wrote; its --debug adds the traceback).\n";

static const char repl_help[] =
    "usage: spk repl     (also: spk alone on a terminal, spk -i [SCRIPT])\n"
    "\n"
    "The interactive session: Lua with readline editing and the globals spk and help. An expression\n"
    "prints its values; help(x) or ?name prints the documentation of x; Tab completes names; Ctrl-C\n"
    "interrupts running code and keeps the session; Ctrl-D ends it. History: $SPK_HISTORY, else\n"
    "~/.spk_history. With standard input not a terminal, it prints only results and errors.\n";

static const char help_help[] =
    "usage: spk help [COMMAND | SCRIPT]\n"
    "\n"
    "Without an argument: every command, option and exit status, and the kernel options. With a\n"
    "command (spk help bench) or a script (spk help experiments/tile_sweep.lua): its own help, as\n"
    "COMMAND --help prints it.\n";

static void print_exit_statuses(FILE *out)
{
    fprintf(out,
            "exit status (every command, experiment and tool):\n"
            "  %d  done\n"
            "  %d  an error (the message is on stderr)\n"
            "  %d  bad arguments (the usage is on stderr)\n"
            "  %d  the work needs a CUDA GPU and there is none: it says so, and nothing was run\n",
            SPK_EXIT_OK, SPK_EXIT_ERROR, SPK_EXIT_USAGE, SPK_EXIT_NO_GPU);
}

static void print_usage(lua_State *L, FILE *out)
{
    fprintf(out,
            "usage: %s [options] [script [args...]]\n"
            "       %s <command> [args...]\n"
            "\n"
            "commands:\n"
            "  run SCRIPT [args...]   run a Lua script (the same as: %s SCRIPT [args...])\n"
            "  repl                   interactive session (also %s alone on a terminal, or -i)\n",
            progname, progname, progname, progname);
    print_lua_commands(L, out);
    fprintf(out,
            "  help [COMMAND]         this text, or a command's help (spk help bench; also COMMAND --help)\n"
            "\n"
            "options:\n"
            "  -e STAT                execute the string STAT (repeatable; before the script)\n"
            "  -l MOD                 require library MOD into global MOD\n"
            "  -i                     enter the interactive session after the script\n"
            "  -v, --version          print the version\n"
            "  -h, --help             print this help\n"
            "  --                     stop handling options\n"
            "  -                      run the script read from standard input\n"
            "\n"
            "A script sees its arguments as ... and in the global table arg, as under lua.\n"
            "Without arguments and with standard input not a terminal, spk runs standard input.\n"
            "\n");
    print_exit_statuses(out);
}

static int usage_error(lua_State *L, const char *fmt, const char *what)
{
    fprintf(stderr, "%s: ", progname);
    fprintf(stderr, fmt, what);
    fputs("\n\n", stderr);
    print_usage(L, stderr);
    return SPK_EXIT_USAGE;
}

/* ---- arguments --------------------------------------------------------- */

enum mode { MODE_DEFAULT, MODE_SCRIPT, MODE_REPL, MODE_COMMAND, MODE_HELP };

struct options {
    enum mode mode;
    int first_word; /* index of the first non-option argument (0: none) */
    int script;     /* index of the script (MODE_SCRIPT) */
    int topic;      /* MODE_HELP: index of the command or script asked about (0: none) */
    const char *builtin_help; /* MODE_HELP: the help of a command written in C */
    int interactive, version, help, executes;
};

static int is_help_word(const char *a)
{
    return a != NULL && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0);
}

/* Reads the options before the first non-option argument, as lua.c does.
 * Returns 0, or an exit status after printing a usage error. */
static int collect_options(lua_State *L, char **argv, struct options *o)
{
    for (int i = 1; argv[i] != NULL; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            o->first_word = i;
            return 0;
        }
        if (strcmp(a, "--") == 0) {
            if (argv[i + 1] != NULL) {
                o->first_word = i + 1;
                o->mode = MODE_SCRIPT; /* after --, a script name is taken literally */
                o->script = i + 1;
            }
            return 0;
        }
        if (strcmp(a, "-i") == 0)
            o->interactive = 1;
        else if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0)
            o->version = 1;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            o->help = 1;
        else if (a[1] == 'e' || a[1] == 'l') {
            if (a[1] == 'e')
                o->executes = 1;
            if (a[2] == '\0') { /* the argument is the next word */
                if (argv[i + 1] == NULL || argv[i + 1][0] == '-')
                    return usage_error(L, "'%s' needs an argument", a);
                i++;
            }
        } else
            return usage_error(L, "unrecognized option '%s'", a);
    }
    return 0;
}

/* Decides what the first non-option argument means. */
static int classify(lua_State *L, char **argv, struct options *o)
{
    if (o->first_word == 0 || o->mode == MODE_SCRIPT)
        return 0;
    const char *word = argv[o->first_word];
    const char *next = argv[o->first_word + 1];
    if (strcmp(word, "run") == 0) {
        if (next == NULL)
            return usage_error(L, "%s needs a script to run", "run");
        if (is_help_word(next)) {
            o->mode = MODE_HELP;
            o->builtin_help = run_help;
            return 0;
        }
        o->mode = MODE_SCRIPT;
        o->script = o->first_word + 1;
    } else if (strcmp(word, "repl") == 0) {
        if (is_help_word(next) && argv[o->first_word + 2] == NULL) {
            o->mode = MODE_HELP;
            o->builtin_help = repl_help;
            return 0;
        }
        if (next != NULL)
            return usage_error(L, "repl takes no arguments (got '%s')", next);
        o->mode = MODE_REPL;
    } else if (strcmp(word, "help") == 0) {
        o->mode = MODE_HELP;
        if (next != NULL && argv[o->first_word + 2] != NULL)
            return usage_error(L, "help takes one command or script (got '%s' after it)", argv[o->first_word + 2]);
        if (next == NULL || is_help_word(next) || strcmp(next, "help") == 0)
            o->builtin_help = next == NULL ? NULL : help_help;
        else if (strcmp(next, "run") == 0)
            o->builtin_help = run_help;
        else if (strcmp(next, "repl") == 0)
            o->builtin_help = repl_help;
        else if (is_lua_command(L, next) || !is_command_word(next))
            o->topic = o->first_word + 1; /* a command, or a script path */
        else
            return usage_error(L, "help: unknown command '%s'", next);
    } else if (is_lua_command(L, word)) {
        o->mode = MODE_COMMAND;
    } else if (is_command_word(word) && access(word, F_OK) != 0) {
        return usage_error(L, "unknown command '%s'", word);
    } else {
        o->mode = MODE_SCRIPT;
        o->script = o->first_word;
    }
    return 0;
}

/* The global `arg`: arg[0] = the script, arg[1..] its arguments, negative
 * indices the program and options before it (lua.c's createargtable). */
static void create_arg_table(lua_State *L, char **argv, int argc, int script)
{
    lua_createtable(L, argc - script - 1 > 0 ? argc - script - 1 : 0, script + 1);
    for (int i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

/* Runs the -e and -l options in order. The first -e gets the globals a
 * session has (spk, help), so `spk -e 'print(spk.zeros(2))'` works as the
 * REPL does. */
static int run_options(lua_State *L, char **argv, int end)
{
    int session_globals = 0;
    for (int i = 1; i < end; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || (a[1] != 'e' && a[1] != 'l'))
            continue;
        const char *value = a[2] != '\0' ? a + 2 : argv[++i];
        int status;
        if (a[1] == 'e' && !session_globals) {
            session_globals = 1;
            lua_pushcfunction(L, spk_cli_open_session_globals);
            if (spk_cli_report(L, spk_cli_docall(L, 0, 0, 1)) != LUA_OK)
                return SPK_EXIT_ERROR;
        }
        if (a[1] == 'e') {
            status = luaL_loadbuffer(L, value, strlen(value), "=(command line)");
            if (status == LUA_OK)
                status = spk_cli_docall(L, 0, 0, 1);
        } else {
            spk_lua_rawglobal(L, "require");
            lua_pushstring(L, value);
            status = spk_cli_docall(L, 1, 1, 1);
            if (status == LUA_OK)
                lua_setglobal(L, value);
        }
        if (spk_cli_report(L, status) != LUA_OK)
            return SPK_EXIT_ERROR;
    }
    return SPK_EXIT_OK;
}

static int push_script_args(lua_State *L)
{
    if (spk_lua_rawglobal(L, "arg") != LUA_TTABLE)
        luaL_error(L, "'arg' is not a table");
    int n = spk_lua_rawcount(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = 1; i <= n; i++)
        lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);
    return n;
}

/* The error message on top of the stack, replaced by what
 * spk.program.on_failure(message) returns when that is a string. */
static void failure_hook(lua_State *L)
{
    int top = lua_gettop(L);
    if (spk_lua_rawfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE) == LUA_TTABLE &&
        spk_lua_rawfield(L, -1, "spk.program") == LUA_TTABLE && spk_lua_rawfield(L, -1, "on_failure") == LUA_TFUNCTION) {
        lua_pushvalue(L, top);
        if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING)
            lua_copy(L, -1, top);
    }
    lua_settop(L, top);
}

static int run_script(lua_State *L, char **argv, int script)
{
    const char *name = argv[script];
    if (strcmp(name, "-") == 0 && strcmp(argv[script - 1], "--") != 0)
        name = NULL; /* standard input */
    char shipped[PATH_MAX];
    if (name && access(name, F_OK) != 0 && spk_find_file(name, shipped, sizeof shipped) == 0)
        name = shipped; /* experiments/x.lua, tools/x.lua: the ones spk ships, from any folder */
    int status = luaL_loadfile(L, name);
    if (status == LUA_OK) {
        int n = push_script_args(L);
        status = spk_cli_docall(L, n, 0, 1);
        if (status != LUA_OK)
            failure_hook(L);
    }
    return spk_cli_report(L, status) == LUA_OK ? SPK_EXIT_OK : SPK_EXIT_ERROR;
}

/* spk <command> args...: require("spk.cli.<command>")(args), with args the
 * words argv[index + 1 .. argc - 1]. */
static int run_command(lua_State *L, char **argv, int argc, int index)
{
    char dir[PATH_MAX];
    if (find_lua_dir(L, dir, sizeof dir))
        add_lua_dir_to_path(L, dir);
    spk_lua_rawglobal(L, "require");
    lua_pushfstring(L, "spk.cli.%s", argv[index]);
    int status = spk_cli_docall(L, 1, 1, 1);
    if (spk_cli_report(L, status) != LUA_OK)
        return SPK_EXIT_ERROR;
    lua_createtable(L, argc - index - 1 > 0 ? argc - index - 1 : 0, 0);
    for (int i = index + 1; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - index);
    }
    status = spk_cli_docall(L, 1, 1, 1);
    if (spk_cli_report(L, status) != LUA_OK)
        return SPK_EXIT_ERROR;
    int code = SPK_EXIT_OK;
    if (lua_isinteger(L, -1))
        code = (int)lua_tointeger(L, -1);
    else if (lua_isboolean(L, -1) && !lua_toboolean(L, -1))
        code = SPK_EXIT_ERROR;
    lua_pop(L, 1);
    return code;
}

static void print_version(void)
{
    printf("%s %s (commit %s, %s; %s)\n", progname, SPK_VERSION, SPK_COMMIT,
           SPK_DIRTY > 0 ? "dirty" : SPK_DIRTY == 0 ? "clean" : "state unknown", LUA_RELEASE);
    fflush(stdout);
}

/* spk help TOPIC: a command's `--help`, or a script's (`spk help tools/x.lua`). */
static int help_topic(lua_State *L, char **argv, int topic)
{
    static char help_word[] = "--help";
    char *words[] = {argv[0], argv[topic], help_word, NULL};
    if (is_lua_command(L, argv[topic])) {
        create_arg_table(L, words, 3, 1);
        return run_command(L, words, 3, 1);
    }
    create_arg_table(L, words, 3, 1);
    return run_script(L, words, 1);
}

static int protected_main(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = (char **)lua_touserdata(L, 2);
    luaL_checkversion(L);
    luaL_openlibs(L);
    preload(L);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0);

    struct options o = {0};
    int code = collect_options(L, argv, &o);
    if (code == 0)
        code = classify(L, argv, &o);
    if (code == 0 && o.mode == MODE_HELP && o.topic) {
        lua_pushinteger(L, help_topic(L, argv, o.topic));
        return 1;
    }
    if (code != 0 || o.help || o.mode == MODE_HELP) {
        if (code == 0 && o.builtin_help) {
            fputs(o.builtin_help, stdout);
        } else if (code == 0) {
            print_usage(L, stdout);
            print_kernel_options(stdout);
        }
        lua_pushinteger(L, code);
        return 1;
    }
    if (o.version)
        print_version();

    create_arg_table(L, argv, argc, o.mode == MODE_SCRIPT ? o.script : o.first_word);
    code = run_options(L, argv, o.first_word ? o.first_word : argc);
    if (code == 0) {
        switch (o.mode) {
        case MODE_SCRIPT:
            code = run_script(L, argv, o.script);
            break;
        case MODE_COMMAND:
            code = run_command(L, argv, argc, o.first_word);
            break;
        case MODE_REPL:
            o.interactive = 1;
            break;
        default:
            if (o.first_word == 0 && !o.interactive && !o.executes && !o.version) {
                if (isatty(STDIN_FILENO)) {
                    o.interactive = 1; /* the session prints its banner */
                } else { /* as lua: run the script on standard input */
                    int status = luaL_loadfile(L, NULL);
                    if (status == LUA_OK)
                        status = spk_cli_docall(L, 0, 0, 1);
                    code = spk_cli_report(L, status) == LUA_OK ? SPK_EXIT_OK : SPK_EXIT_ERROR;
                }
            }
            break;
        }
    }
    if (code == 0 && o.interactive)
        code = spk_repl(L);
    lua_pushinteger(L, code);
    return 1;
}

int main(int argc, char **argv)
{
    if (argv[0] == NULL) {
        static char *fallback[] = {"spk", NULL};
        argv = fallback;
        argc = 1;
    }
    program_argc = argc;
    program_argv = argv;
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        fprintf(stderr, "%s: cannot create the Lua state: not enough memory\n", progname);
        return SPK_EXIT_ERROR;
    }
    lua_pushcfunction(L, protected_main);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int code = SPK_EXIT_ERROR;
    if (status == LUA_OK)
        code = (int)lua_tointeger(L, -1);
    else
        spk_cli_report(L, status);
    /* Closing the state runs pending __gc and __close handlers (freeing
     * tensors and device memory) before the process ends. */
    lua_close(L);
    return code;
}

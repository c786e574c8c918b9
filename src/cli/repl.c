/* The interactive session: `spk repl`, `spk -i`, and `spk` on a terminal.
 *
 * On a terminal: readline editing with history saved across sessions
 * ($SPK_HISTORY or ~/.spk_history), prompts "> " and ">> ". Ctrl-C cancels
 * the input being typed (or interrupts running code), Ctrl-D ends the session.
 * When standard input is not a terminal (a pipe, a file), lines are read
 * plainly and no prompts are printed, so the output holds only results and
 * errors; history is then kept only if $SPK_HISTORY names a file.
 *
 * A line is first tried as an expression ("return <line>", as lua.c 5.4
 * does), so `1 + 1` prints 2; a chunk that ends early ("<eof>") continues on
 * the next line. Results print through spk.repl.format (lua/spk/repl.lua),
 * separated by tabs; errors print their message and the session goes on. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <lauxlib.h>
#include <lua.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/file.h"

#define HISTORY_LENGTH 1000
#define PROMPT "> "
#define PROMPT_MORE ">> "
#define CHUNK_NAME "=stdin"

struct session {
    int terminal;        /* stdin is a terminal: readline and prompts */
    char history[4096];  /* history file, "" when history is not kept */
};

/* ---- reading lines ----------------------------------------------------- */

static volatile sig_atomic_t input_interrupted = 0;
static char *completed_line = NULL;
static int line_complete = 0;

static void on_line(char *line)
{
    completed_line = line;
    line_complete = 1;
    rl_callback_handler_remove();
}

static void on_input_interrupt(int sig)
{
    (void)sig;
    input_interrupted = 1;
}

/* Reads one line with readline's callback interface, so that Ctrl-C only
 * sets a flag (select returns EINTR) and the line state is reset outside the
 * signal handler. Returns a malloc'd line; NULL at end of input, or with
 * *cancelled set after Ctrl-C. */
static char *read_terminal_line(const char *prompt, int *cancelled)
{
    struct sigaction action = {0}, previous;
    action.sa_handler = on_input_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous); /* no SA_RESTART: select must return */

    input_interrupted = 0;
    line_complete = 0;
    completed_line = NULL;
    rl_callback_handler_install(prompt, on_line);
    int fd = fileno(rl_instream ? rl_instream : stdin);
    while (!line_complete) {
        fd_set ready;
        FD_ZERO(&ready);
        FD_SET(fd, &ready);
        int n = select(fd + 1, &ready, NULL, NULL, NULL);
        if (n < 0 && errno == EINTR && input_interrupted) {
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_callback_handler_remove();
            fputc('\n', rl_outstream ? rl_outstream : stdout);
            *cancelled = 1;
            break;
        }
        if (n < 0 && errno != EINTR) {
            rl_callback_handler_remove();
            break;
        }
        if (n > 0)
            rl_callback_read_char();
    }
    sigaction(SIGINT, &previous, NULL);
    return completed_line;
}

/* Without a terminal: any length, no prompt. */
static char *read_plain_line(void)
{
    char *line = NULL;
    size_t size = 0;
    ssize_t n = getline(&line, &size, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n > 0 && line[n - 1] == '\n')
        line[--n] = '\0';
    return line;
}

static char *read_line(struct session *s, const char *prompt, int *cancelled)
{
    *cancelled = 0;
    if (s->terminal)
        return read_terminal_line(prompt, cancelled);
    return read_plain_line();
}

/* ---- history ----------------------------------------------------------- */

static void open_history(struct session *s)
{
    s->history[0] = '\0';
    const char *env = getenv("SPK_HISTORY");
    if (env && *env)
        snprintf(s->history, sizeof s->history, "%s", env);
    else if (s->terminal && getenv("HOME"))
        snprintf(s->history, sizeof s->history, "%s/.spk_history", getenv("HOME"));
    if (!s->history[0])
        return;
    int fd = spk_file_open(s->history, NULL); /* a FIFO there would block readline's open */
    if (fd >= 0)
        close(fd);
    else if (access(s->history, F_OK) == 0) {
        fprintf(stderr, "spk: warning: %s; history is not kept\n", spk_last_error());
        s->history[0] = '\0';
        return;
    }
    using_history();
    stifle_history(HISTORY_LENGTH);
    read_history(s->history); /* a missing file is the normal first session */
}

static void remember(struct session *s, const char *chunk)
{
    if (s->history[0] && chunk[strspn(chunk, " \t")] != '\0')
        add_history(chunk);
}

static void save_history(struct session *s)
{
    if (!s->history[0])
        return;
    int err = write_history(s->history);
    if (err == 0)
        err = history_truncate_file(s->history, HISTORY_LENGTH);
    if (err != 0)
        fprintf(stderr, "spk: cannot save history to %s: %s\n", s->history, strerror(err));
    clear_history();
}

/* ---- compiling input ----------------------------------------------------- */

/* A syntax error at the end of the input: the chunk is not finished yet. */
static int is_incomplete(lua_State *L, int status)
{
    if (status != LUA_ERRSYNTAX)
        return 0;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    return len >= 5 && strcmp(msg + len - 5, "<eof>") == 0;
}

enum { INPUT_READY, INPUT_CANCELLED, INPUT_END };

/* Reads and compiles one chunk, leaving the function (or the syntax error
 * message) on the stack with *status. Returns INPUT_READY, INPUT_CANCELLED
 * (Ctrl-C: nothing pushed) or INPUT_END (end of input: nothing pushed). */
static int read_chunk(lua_State *L, struct session *s, int *status)
{
    int cancelled;
    char *line = read_line(s, PROMPT, &cancelled);
    if (line == NULL)
        return cancelled ? INPUT_CANCELLED : INPUT_END;

    /* An expression: print its values. "=expr" is accepted as in Lua 5.1. */
    const char *expr = line[0] == '=' ? line + 1 : line;
    const char *code = lua_pushfstring(L, "return %s;", expr);
    *status = luaL_loadbuffer(L, code, strlen(code), CHUNK_NAME);
    lua_remove(L, -2);
    if (*status == LUA_OK) {
        remember(s, line);
        free(line);
        return INPUT_READY;
    }
    lua_pop(L, 1);

    /* Statements, possibly over several lines. */
    luaL_Buffer chunk;
    luaL_buffinit(L, &chunk);
    luaL_addstring(&chunk, line);
    free(line);
    luaL_pushresult(&chunk);
    for (;;) {
        size_t len;
        const char *text = lua_tolstring(L, -1, &len);
        *status = luaL_loadbuffer(L, text, len, CHUNK_NAME);
        if (!is_incomplete(L, *status))
            break;
        lua_pop(L, 1);
        char *more = read_line(s, PROMPT_MORE, &cancelled);
        if (more == NULL) {
            if (cancelled) {
                lua_pop(L, 1);
                return INPUT_CANCELLED;
            }
            /* End of input inside a chunk: report the incomplete chunk. */
            *status = luaL_loadbuffer(L, text, len, CHUNK_NAME);
            break;
        }
        lua_pushfstring(L, "\n%s", more);
        free(more);
        lua_concat(L, 2);
    }
    remember(s, lua_tostring(L, -2));
    lua_remove(L, -2);
    return INPUT_READY;
}

/* ---- showing results --------------------------------------------------- */

/* Renders the value at idx with spk.repl.format when available. */
static const char *format_value(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_getfield(L, LUA_REGISTRYINDEX, "spk.repl.format");
    if (lua_isfunction(L, -1)) {
        lua_pushvalue(L, idx);
        if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING)
            return lua_tostring(L, -1);
    }
    lua_pop(L, 1);
    return luaL_tolstring(L, idx, NULL);
}

static void print_results(lua_State *L, int base)
{
    int n = lua_gettop(L) - base;
    if (n <= 0)
        return;
    luaL_checkstack(L, 8, "too many results to print");
    for (int i = 1; i <= n; i++) {
        const char *text = format_value(L, base + i);
        fputs(text, stdout);
        fputc(i < n ? '\t' : '\n', stdout);
        lua_pop(L, 1);
    }
    fflush(stdout);
}

static int load_helpers(lua_State *L)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, "spk");
    lua_call(L, 1, 1);
    lua_setglobal(L, "spk");
    lua_getglobal(L, "require");
    lua_pushstring(L, "spk.repl");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "format");
    lua_setfield(L, LUA_REGISTRYINDEX, "spk.repl.format");
    return 0;
}

int spk_repl(lua_State *L)
{
    struct session s = {0};
    s.terminal = isatty(STDIN_FILENO);
    if (s.terminal) {
        rl_readline_name = "spk";
        rl_catch_signals = 0; /* Ctrl-C is handled here */
    }
    open_history(&s);

    /* The session's conveniences: the global spk and the result printer. A
     * failure (a broken module) is reported; the session still starts. */
    lua_pushcfunction(L, load_helpers);
    spk_cli_report(L, spk_cli_docall(L, 0, 0, 0));

    for (;;) {
        lua_settop(L, 0);
        int status = LUA_OK;
        int input = read_chunk(L, &s, &status);
        if (input == INPUT_END)
            break;
        if (input == INPUT_CANCELLED)
            continue;
        if (status == LUA_OK)
            status = spk_cli_docall(L, 0, LUA_MULTRET, 0);
        if (status == LUA_OK)
            print_results(L, 0);
        else
            spk_cli_report(L, status);
    }
    lua_settop(L, 0); /* readline has ended the line at Ctrl-D */
    fflush(stdout);
    save_history(&s);
    return SPK_EXIT_OK;
}

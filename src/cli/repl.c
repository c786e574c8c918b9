/* The interactive session: `spk repl`, `spk -i`, and `spk` on a terminal.
 *
 * On a terminal: readline editing with history saved across sessions
 * ($SPK_HISTORY or ~/.spk_history, each entry appended as it is entered),
 * prompts "> " and ">> ". Ctrl-C cancels
 * the input being typed (or interrupts running code), Ctrl-D ends the session.
 * When standard input is not a terminal (a pipe, a file), lines are read
 * plainly and no prompts are printed, so the output holds only results and
 * errors; history is then kept only if $SPK_HISTORY names a file.
 *
 * A line is first tried as an expression ("return <line>", as lua.c 5.4
 * does), so `1 + 1` prints 2; a chunk that ends early ("<eof>") continues on
 * the next line; "?name" prints help for name. Every chunk runs with
 * spk.repl.env as its _ENV, and a chunk of statements ends by handing its
 * top-level locals to spk.repl.keep_locals, so `local z = 5` on one line
 * leaves z for the next. Results print through spk.repl.format
 * (lua/spk/repl.lua), separated by tabs, those of a call (a line that is a
 * statement too, such as R:set(...)) as summaries; errors print their message
 * and the session goes on. Without a terminal the session ends with exit
 * status 1 if any line failed. Tab completes the Lua expression before the
 * cursor through spk.repl.complete_line, and file names inside a string as a
 * shell does. On a terminal the session opens with a one-line banner. */
#include <errno.h>
#include <fcntl.h>
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
#include "lua/bind.h"

#define HISTORY_LENGTH 1000
#define PROMPT "> "
#define PROMPT_MORE ">> "
#define CHUNK_NAME "=stdin"
#define REPL_FORMAT_KEY "spk.repl.format"
#define REPL_COMPLETE_KEY "spk.repl.complete_line"
#define REPL_HELP_KEY "spk.repl.help_topic"
#define REPL_ENV_KEY "spk.repl.env"
#define REPL_KEEP_KEY "spk.repl.keep_locals"
/* Appended to a chunk of statements: hands its locals to the keeper, which
 * the chunk gets as its first argument. On a line of its own, after any
 * comment the chunk ends with. */
#define KEEP_LOCALS_CALL "\n;(...)()"

struct session {
    int terminal;        /* stdin is a terminal: readline and prompts */
    char history[4096];  /* history file, "" when history is not kept */
    int history_warned;  /* a history error was reported (once a session) */
    int failed;          /* a line failed (the exit status without a terminal) */
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

/* ---- history -----------------------------------------------------------
 * Each entry is appended to the file as soon as it is entered, so no way of
 * ending the session (Ctrl-D, a second Ctrl-C, a crash, kill -9) loses it.
 * The file is cut to the last HISTORY_LENGTH entries when a session opens
 * and when it ends. */

static void history_warning(struct session *s, const char *what, int err)
{
    if (s->history_warned)
        return;
    s->history_warned = 1;
    fprintf(stderr, "spk: cannot %s history file %s: %s (history is not saved)\n", what, s->history, strerror(err));
    fflush(stderr);
}

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
    /* append_history needs the file to exist; entries may hold secrets. */
    int created = open(s->history, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0600);
    if (created < 0) {
        history_warning(s, "open", errno);
        return;
    }
    close(created);
    history_truncate_file(s->history, HISTORY_LENGTH);
    read_history(s->history);
}

static void remember(struct session *s, const char *chunk)
{
    if (!s->history[0] || chunk[strspn(chunk, " \t")] == '\0')
        return;
    add_history(chunk);
    int err = append_history(1, s->history);
    if (err != 0)
        history_warning(s, "append to", err);
}

static void close_history(struct session *s)
{
    if (!s->history[0])
        return;
    int err = history_truncate_file(s->history, HISTORY_LENGTH);
    if (err != 0)
        history_warning(s, "trim", err);
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

/* Gives the compiled chunk on top of the stack the session's _ENV. */
static void set_session_env(lua_State *L)
{
    if (spk_lua_rawfield(L, LUA_REGISTRYINDEX, REPL_ENV_KEY) != LUA_TTABLE || !lua_setupvalue(L, -2, 1))
        lua_pop(L, 1);
}

/* The chunk of statements `text` (compiled, on top of the stack) replaced by
 * one that keeps its locals, when the keeper exists and the text allows a
 * call after it (a chunk ending in `return` does not); *narg gets the
 * keeper. */
static void keep_locals_of(lua_State *L, const char *text, size_t len, int *narg)
{
    if (spk_lua_rawfield(L, LUA_REGISTRYINDEX, REPL_KEEP_KEY) != LUA_TFUNCTION) {
        lua_pop(L, 1);
        return;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, text, len);
    luaL_addstring(&b, KEEP_LOCALS_CALL);
    luaL_pushresult(&b);
    size_t with_len;
    const char *with = lua_tolstring(L, -1, &with_len);
    if (luaL_loadbuffer(L, with, with_len, CHUNK_NAME) != LUA_OK) {
        lua_pop(L, 3); /* the message, the text, the keeper */
        return;
    }
    lua_remove(L, -2); /* the text */
    lua_insert(L, -2); /* the keeper above its chunk */
    lua_remove(L, -3); /* the chunk without it */
    *narg = 1;
}

/* Reads and compiles one chunk, leaving the function (or the syntax error
 * message) and *narg arguments on the stack with *status. Returns
 * INPUT_READY, INPUT_CANCELLED (Ctrl-C: nothing pushed) or INPUT_END (end of
 * input: nothing pushed). */
static int read_chunk(lua_State *L, struct session *s, int *status, int *narg, int *summary)
{
    int cancelled;
    *narg = 0;
    *summary = 0;
    char *line = read_line(s, PROMPT, &cancelled);
    if (line == NULL)
        return cancelled ? INPUT_CANCELLED : INPUT_END;

    /* "?name": help for name (spk.repl.help_topic). */
    const char *start = line + strspn(line, " \t");
    if (*start == '?') {
        spk_lua_rawfield(L, LUA_REGISTRYINDEX, REPL_HELP_KEY);
        if (lua_isfunction(L, -1)) {
            lua_pushstring(L, start + 1);
            *status = LUA_OK;
            *narg = 1;
            remember(s, line);
            free(line);
            return INPUT_READY;
        }
        lua_pop(L, 1); /* no helpers: the line is compiled as Lua, which reports it */
    }

    /* An expression: print its values. "=expr" is accepted as in Lua 5.1. */
    const char *expr = line[0] == '=' ? line + 1 : line;
    const char *code = lua_pushfstring(L, "return %s;", expr);
    *status = luaL_loadbuffer(L, code, strlen(code), CHUNK_NAME);
    lua_remove(L, -2);
    if (*status == LUA_OK) {
        set_session_env(L);
        /* a call (an expression that is a statement too): its results are summarised */
        if (luaL_loadbuffer(L, expr, strlen(expr), CHUNK_NAME) == LUA_OK)
            *summary = 1;
        lua_pop(L, 1);
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
        lua_pushfstring(L, "%s\n%s", lua_tostring(L, -1), more);
        free(more);
        lua_remove(L, -2);
    }
    remember(s, lua_tostring(L, -2));
    if (*status == LUA_OK) {
        size_t len;
        const char *text = lua_tolstring(L, -2, &len);
        keep_locals_of(L, text, len, narg);
        lua_pushvalue(L, -1 - *narg);
        set_session_env(L);
        lua_pop(L, 1);
    }
    lua_remove(L, -2 - *narg);
    return INPUT_READY;
}

/* ---- completion ---------------------------------------------------------
 * Tab asks spk.repl.complete_line for the Lua expression before the cursor
 * (the whole line up to it: "layers[1].W" spans word breaks), which returns
 * what replaces readline's word. Inside a string readline completes file
 * names instead, listed by their last part as a shell lists them; Lua
 * matches list without their common "a.b." part. */

static lua_State *completion_state = NULL;
static char **completion_list = NULL;
static size_t completion_count = 0, completion_next = 0;

static void completion_free(void)
{
    for (size_t i = completion_next; i < completion_count; i++)
        free(completion_list[i]);
    free(completion_list);
    completion_list = NULL;
    completion_count = completion_next = 0;
}

/* Fills completion_list from spk.repl.complete_line(line before the cursor,
 * start of the word); errors give no matches. */
static int collect_matches(lua_State *L)
{
    spk_lua_rawfield(L, LUA_REGISTRYINDEX, REPL_COMPLETE_KEY);
    lua_pushlstring(L, rl_line_buffer, (size_t)(rl_point > 0 ? rl_point : 0));
    lua_pushinteger(L, (lua_Integer)lua_tointeger(L, 1));
    lua_call(L, 2, 1);
    if (lua_type(L, -1) != LUA_TTABLE)
        return 0;
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    completion_list = calloc((size_t)(n > 0 ? n : 1), sizeof *completion_list);
    if (!completion_list)
        return 0;
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, -1, i) == LUA_TSTRING) {
            char *copy = strdup(lua_tostring(L, -1));
            if (copy)
                completion_list[completion_count++] = copy;
        }
        lua_pop(L, 1);
    }
    return 0;
}

static int completion_start = 0;

static char *next_match(const char *text, int state)
{
    (void)text;
    if (state == 0) {
        completion_free();
        lua_State *L = completion_state;
        int top = lua_gettop(L);
        lua_pushcfunction(L, collect_matches);
        lua_pushinteger(L, completion_start);
        lua_pcall(L, 1, 0, 0); /* an error leaves the matches found so far */
        lua_settop(L, top);
    }
    if (completion_next < completion_count)
        return completion_list[completion_next++]; /* readline frees it */
    completion_free();
    return NULL;
}

static char **complete_lua(const char *text, int start, int end)
{
    (void)end;
    if (rl_completion_quote_character != 0)
        return NULL; /* inside a string: readline's file names */
    rl_attempted_completion_over = 1;
    rl_completion_append_character = '\0';
    completion_start = start;
    return rl_completion_matches(text, next_match);
}

/* What a list of matches shows of one: a Lua name the part after its last
 * '.' or ':'; a file name all of it, which readline's list cuts to the last
 * part and marks when a folder, as a shell lists them. malloc'd. */
static char *shown_part(const char *match)
{
    if (rl_filename_completion_desired)
        return strdup(match);
    const char *cut = strrchr(match, '.'), *colon = strrchr(match, ':');
    if (colon && (!cut || colon > cut))
        cut = colon;
    return strdup(cut ? cut + 1 : match);
}

static void display_matches(char **matches, int count, int longest)
{
    (void)longest;
    char **shown = calloc((size_t)count + 2, sizeof *shown);
    if (!shown)
        return;
    int width = 0;
    shown[0] = matches[0];
    for (int i = 1; i <= count; i++) {
        shown[i] = shown_part(matches[i]);
        int len = shown[i] ? (int)strlen(shown[i]) : 0;
        if (len > width)
            width = len;
    }
    rl_display_match_list(shown, count, width);
    rl_forced_update_display();
    for (int i = 1; i <= count; i++)
        free(shown[i]);
    free(shown);
}

static void setup_completion(lua_State *L)
{
    completion_state = L;
    rl_attempted_completion_function = complete_lua;
    rl_completion_display_matches_hook = display_matches;
    rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(+-*/%^~#[],";
    rl_completer_word_break_characters = rl_basic_word_break_characters;
    rl_completer_quote_characters = "\"'";
}

/* ---- showing results --------------------------------------------------- */

/* Renders the value at idx with spk.repl.format when available (as a
 * summary for the results of a call). */
static const char *format_value(lua_State *L, int idx, int summary)
{
    idx = lua_absindex(L, idx);
    spk_lua_rawfield(L, LUA_REGISTRYINDEX, REPL_FORMAT_KEY);
    if (lua_isfunction(L, -1)) {
        lua_pushvalue(L, idx);
        if (summary)
            lua_pushliteral(L, "summary");
        else
            lua_pushnil(L);
        if (lua_pcall(L, 2, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING)
            return lua_tostring(L, -1);
    }
    lua_pop(L, 1);
    return luaL_tolstring(L, idx, NULL); /* metamethods wanted: a result prints as print() shows it */
}

static void print_results(lua_State *L, int base, int summary)
{
    int n = lua_gettop(L) - base;
    if (n <= 0)
        return;
    luaL_checkstack(L, 8, "too many results to print");
    for (int i = 1; i <= n; i++) {
        const char *text = format_value(L, base + i, summary);
        fputs(text, stdout);
        fputc(i < n ? '\t' : '\n', stdout);
        lua_pop(L, 1);
    }
    fflush(stdout);
}

int spk_cli_open_session_globals(lua_State *L)
{
    spk_lua_rawglobal(L, "require");
    lua_pushstring(L, "spk");
    lua_call(L, 1, 1);
    spk_lua_rawfield(L, -1, "help");
    lua_setglobal(L, "help");
    lua_setglobal(L, "spk");
    return 0;
}

/* The session's helpers from lua/spk/repl.lua, kept in the registry so that
 * a script replacing the globals cannot break the session. */
static int load_helpers(lua_State *L)
{
    spk_cli_open_session_globals(L);
    spk_lua_rawglobal(L, "require");
    lua_pushstring(L, "spk.repl");
    lua_call(L, 1, 1);
    static const char *const helpers[][2] = {
        {"format", REPL_FORMAT_KEY}, {"complete_line", REPL_COMPLETE_KEY}, {"help_topic", REPL_HELP_KEY},
        {"env", REPL_ENV_KEY}, {"keep_locals", REPL_KEEP_KEY}};
    for (size_t i = 0; i < sizeof helpers / sizeof *helpers; i++) {
        spk_lua_rawfield(L, -1, helpers[i][0]);
        lua_setfield(L, LUA_REGISTRYINDEX, helpers[i][1]);
    }
    if (lua_toboolean(L, lua_upvalueindex(1))) {
        spk_lua_rawfield(L, -1, "banner");
        lua_call(L, 0, 1);
        puts(lua_tostring(L, -1) ? lua_tostring(L, -1) : "spk");
        fflush(stdout);
    }
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

    /* The session's conveniences: the globals spk and help, the result
     * printer, completion, and the banner on a terminal. A failure (a broken
     * module) is reported; the session still starts. */
    lua_pushboolean(L, s.terminal);
    lua_pushcclosure(L, load_helpers, 1);
    spk_cli_report(L, spk_cli_docall(L, 0, 0, 0));
    if (s.terminal)
        setup_completion(L);

    for (;;) {
        lua_settop(L, 0);
        int status = LUA_OK, narg = 0, summary = 0;
        int input = read_chunk(L, &s, &status, &narg, &summary);
        if (input == INPUT_END)
            break;
        if (input == INPUT_CANCELLED)
            continue;
        if (status == LUA_OK)
            status = spk_cli_docall(L, narg, LUA_MULTRET, 0);
        if (status == LUA_OK) {
            print_results(L, 0, summary);
        } else {
            s.failed = 1;
            spk_cli_report(L, status);
        }
    }
    lua_settop(L, 0); /* readline has ended the line at Ctrl-D */
    fflush(stdout);
    close_history(&s);
    /* piped input is a script: a line that failed fails it */
    return s.failed && !s.terminal ? SPK_EXIT_ERROR : SPK_EXIT_OK;
}

/* The spk program: pieces shared by the command line (main.c) and the
 * interactive session (repl.c). */
#ifndef SPK_CLI_H
#define SPK_CLI_H

#include <lua.h>

#include "core/exit_status.h" /* SPK_EXIT_OK, _ERROR, _USAGE, _NO_GPU */

/* Calls the function below its narg arguments in protected mode, with
 * Ctrl-C interrupting it. With traceback set, the error message carries a
 * stack traceback (scripts); without, only the message (the REPL). */
int spk_cli_docall(lua_State *L, int narg, int nres, int traceback);

/* If status is an error, prints the message on top of the stack to stderr
 * prefixed with "spk: " and pops it. Returns status. */
int spk_cli_report(lua_State *L, int status);

/* Runs the interactive session on L until end of input. Sets the globals
 * first (spk_cli_open_session_globals). Returns an exit status. */
int spk_repl(lua_State *L);

/* A lua_CFunction: sets the globals a session has, `spk` (require "spk")
 * and `help` (spk.help); `spk -e` gets them too. */
int spk_cli_open_session_globals(lua_State *L);

#endif

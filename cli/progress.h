/* progress: one "\r" status line on stderr while a long step runs.
 *
 * Only on a terminal, and only once the step has run for more than two seconds: a short
 * run, a pipe or a log file never see it. A thread redraws it four times a second, so it
 * moves even while a stage is silent; the line is erased when the step ends, so what
 * follows starts on a clean line.
 */
#ifndef COLLPROF_CLI_PROGRESS_H
#define COLLPROF_CLI_PROGRESS_H

typedef struct cli_progress cli_progress;

/* NULL when stderr is not a terminal (or no thread could start): every function below
 * accepts NULL and does nothing. */
cli_progress *cli_progress_start(const char *verb, const char *what);

/* A cpa_progress_fn: ctx is the cli_progress (or NULL). */
void cli_progress_update(void *ctx, const char *stage, double fraction);

/* Stops the thread, erases the line, frees. */
void cli_progress_stop(cli_progress *p);

#endif

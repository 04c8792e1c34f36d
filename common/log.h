/* log: one-line messages on stderr (or the side log), `collprof: LEVEL message`.
 *
 * The level comes from COLLPROF_DEBUG (WARN by default). Each message is written with a
 * single write(2) so lines of many ranks sharing a terminal never interleave mid-line.
 */
#ifndef COLLPROF_LOG_H
#define COLLPROF_LOG_H

enum cp_log_level { CP_LOG_WARN = 0, CP_LOG_INFO = 1, CP_LOG_TRACE = 2 };

/* Sets the level; cp_settings_load() calls it with COLLPROF_DEBUG's value. */
void cp_log_set_level(int level);
int cp_log_level(void);
/* Parses WARN, INFO, TRACE (any case); -1 when it is none of them. */
int cp_log_level_parse(const char *s);
const char *cp_log_level_name(int level);

/* The shim's stderr is the job's fd 2, and the job may close it and open a file of its own
 * there (its data, its log): a line written then would land in that file. cp_log_guard_stderr
 * records fd 2's identity (fstat: device, inode, rdev, type) once, at load; from then on a
 * line goes to fd 2 only while it is still that file. Otherwise it goes to the side log
 * (cp_log_set_side: a function that opens it, called at the first line that needs it), or,
 * before there is one, waits in a small buffer that the side log receives when it is set;
 * what does not fit is dropped and counted, and the count is written with the rest.
 * Without the guard (the command-line tools) every line goes to fd 2. errno is kept. */
void cp_log_guard_stderr(void);
/* open_side: returns an fd (O_APPEND, kept high) or -1. */
void cp_log_set_side(int (*open_side)(void));
/* In a fork child: forgets (closes) the parent's side log and anything a parent's thread
 * held; the child's trace, a file of its own, sets its own. */
void cp_log_after_fork_child(void);

void cp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define cp_warn(...) cp_log(CP_LOG_WARN, __VA_ARGS__)
#define cp_info(...) cp_log(CP_LOG_INFO, __VA_ARGS__)
#define cp_trace(...) cp_log(CP_LOG_TRACE, __VA_ARGS__)

#endif

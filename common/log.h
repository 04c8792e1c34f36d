/* log: one-line messages on stderr, `collprof: LEVEL message`.
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

void cp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define cp_warn(...) cp_log(CP_LOG_WARN, __VA_ARGS__)
#define cp_info(...) cp_log(CP_LOG_INFO, __VA_ARGS__)
#define cp_trace(...) cp_log(CP_LOG_TRACE, __VA_ARGS__)

#endif

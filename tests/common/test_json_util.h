/* tests/common/test_json_util.h: a JSON text parsed as RFC 8259 allows and nothing more
 * (json-c's strict mode), failing the cmocka test with the parser's reason otherwise. What
 * each test of a JSON output starts with. Include after cmocka.h. */
#ifndef COLLPROF_TESTS_JSON_UTIL_H
#define COLLPROF_TESTS_JSON_UTIL_H

#include <json-c/json.h>
#include <string.h>

/* `what` names the output in the failure ("report JSON"); the caller puts the object. */
static inline json_object *tj_parse_strict(const char *s, const char *what)
{
    json_tokener *tok = json_tokener_new();
    if (!tok)
        fail_msg("%s: no memory for a JSON parser", what);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, s, (int)strlen(s));
    enum json_tokener_error e = json_tokener_get_error(tok);
    json_tokener_free(tok);
    if (!o || e != json_tokener_success)
        fail_msg("%s does not parse strictly (%s): %.200s", what, json_tokener_error_desc(e), s);
    return o;
}

#endif

/* common/text: what cp_text_escape makes of every kind of byte a file can hold, how it cuts
 * to a buffer, and that what it returns is the whole escaped length. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "tests/common/test_text_util.h"

static void escaped(const char *s, size_t len, const char *want)
{
    char out[512];
    size_t n = cp_text_escape(out, sizeof out, s, len);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
    char *dup = cp_text_escape_dup(s, len);
    assert_non_null(dup);
    assert_string_equal(dup, want);
    free(dup);
}

#define ESCAPED(lit, want) escaped(lit, sizeof lit - 1, want)

static void control_characters_become_visible_escapes(void **state)
{
    (void)state;
    ESCAPED(TX_HOSTILE, TX_HOSTILE_SHOWN);
    ESCAPED("a\0b", "a\\x00b");
    ESCAPED("\t\r\x1f", "\\x09\\x0d\\x1f");
    /* C1 as UTF-8: U+0080 and U+009F are controls, U+00A0 (no-break space) is not */
    ESCAPED("\xc2\x80|\xc2\x9f|\xc2\xa0", "\\xc2\\x80|\\xc2\\x9f|\xc2\xa0");
}

static void valid_utf8_is_kept_and_invalid_bytes_escaped(void **state)
{
    (void)state;
    ESCAPED("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    ESCAPED("\xff\xfe", "\\xff\\xfe");
    /* overlong '/', a surrogate, a sequence cut by the end */
    ESCAPED("\xc0\xaf", "\\xc0\\xaf");
    ESCAPED("\xed\xa0\x80", "\\xed\\xa0\\x80");
    ESCAPED("ok\xe2\x82", "ok\\xe2\\x82");
    /* a backslash stays, so escaping twice is escaping once */
    ESCAPED("C:\\x1b", "C:\\x1b");
    char once[128], twice[128];
    cp_text_escape(once, sizeof once, TX_HOSTILE, strlen(TX_HOSTILE));
    cp_text_escape(twice, sizeof twice, once, strlen(once));
    assert_string_equal(twice, once);
}

static void a_cut_keeps_whole_characters_and_escapes(void **state)
{
    (void)state;
    char out[16];
    const char *s = "ab\x1b" "cd\xc3\xa9";
    /* "ab\x1bcdé" is 10 bytes: with room for 5, the escape does not fit and nothing after */
    assert_int_equal(cp_text_escape(out, 6, s, strlen(s)), 10);
    assert_string_equal(out, "ab");
    assert_int_equal(cp_text_escape(out, 7, s, strlen(s)), 10);
    assert_string_equal(out, "ab\\x1b");
    assert_int_equal(cp_text_escape(out, 10, s, strlen(s)), 10);
    assert_string_equal(out, "ab\\x1bcd");
    assert_int_equal(cp_text_escape(out, 11, s, strlen(s)), 10);
    assert_string_equal(out, "ab\\x1bcd\xc3\xa9");
    assert_int_equal(cp_text_escape(out, 1, s, strlen(s)), 10);
    assert_string_equal(out, "");
    /* no room at all: only the length */
    assert_int_equal(cp_text_escape(NULL, 0, s, strlen(s)), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(control_characters_become_visible_escapes),
        cmocka_unit_test(valid_utf8_is_kept_and_invalid_bytes_escaped),
        cmocka_unit_test(a_cut_keeps_whole_characters_and_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

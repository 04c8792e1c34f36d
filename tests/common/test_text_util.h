/* test_text_util: the hostile string the terminal-safety tests put in every place a file or
 * a stats block holds text, what collprof must show instead, and the check that output
 * holds nothing a terminal would act on. Header-only; needs cmocka included before it. */
#ifndef COLLPROF_TEST_TEXT_UTIL_H
#define COLLPROF_TEST_TEXT_UTIL_H

#include <stddef.h>
#include <string.h>

/* What a terminal acts on: CSI "clear the screen", OSC "set the title" ended by BEL, the
 * one-byte C1 CSI (0x9b, as a raw byte and as UTF-8 U+009B), a line break, DEL; and an
 * accented letter (valid UTF-8), which must be kept. 25 bytes: it fits a hostname field. */
#define TX_HOSTILE "ev\033[2J\033]0;x\007\x9b" "1m\xc2\x9b" "2J\n\x7f" "il\xc3\xa9"
/* The same as collprof shows it: every byte of a control character as \xNN. */
#define TX_HOSTILE_SHOWN "ev\\x1b[2J\\x1b]0;x\\x07\\x9b1m\\xc2\\x9b2J\\x0a\\x7fil\xc3\xa9"

/* Fails, naming the byte, when s (n bytes) holds a byte a terminal would act on: a C0
 * control other than a line break, DEL, a C1 control (raw, or UTF-8 encoded), or a byte
 * of invalid UTF-8 (0x9b alone is CSI to an 8-bit terminal). */
static inline void tx_assert_terminal_safe_n(const char *what, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        int bad = len == 0 || i + len > n || (c < 0x20 && c != '\n') || c == 0x7f ||
                  (c == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f);
        for (size_t k = 1; !bad && k < len; k++)
            bad = (u[i + k] & 0xc0) != 0x80;
        if (bad)
            fail_msg("%s: byte 0x%02x at %zu of: %.*s", what, c, i, (int)(n < 300 ? n : 300), s);
        i += len;
    }
}

static inline void tx_assert_terminal_safe(const char *what, const char *s)
{
    tx_assert_terminal_safe_n(what, s, strlen(s));
}

#endif

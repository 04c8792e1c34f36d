/* text: strings from files made safe to show (text.h). */
#include "common/text.h"

#include <stdlib.h>
#include <string.h>

size_t cp_utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (len > n)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

/* 0 when the character at u (n bytes long, valid UTF-8) is shown as it is. */
static int is_control(const unsigned char *u, size_t n)
{
    if (n == 1)
        return u[0] < 0x20 || u[0] == 0x7f;
    /* U+0080..U+009F: the C1 controls, which a UTF-8 terminal acts on as the raw bytes */
    return n == 2 && u[0] == 0xc2 && u[1] < 0xa0;
}

size_t cp_text_escape(char *dst, size_t size, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t need = 0, kept = 0, i = 0;
    int full = size == 0;
    while (i < len) {
        size_t n = cp_utf8_len(u + i, len - i);
        int esc = n == 0 || is_control(u + i, n);
        if (n == 0)
            n = 1;
        size_t w = esc ? 4 * n : n;
        /* once one piece does not fit, none after it goes in: the head stays whole */
        if (!full && kept + w < size) {
            for (size_t k = 0; esc && k < n; k++) {
                char *d = dst + kept + 4 * k;
                d[0] = '\\';
                d[1] = 'x';
                d[2] = hex[u[i + k] >> 4];
                d[3] = hex[u[i + k] & 0xf];
            }
            if (!esc)
                memcpy(dst + kept, u + i, n);
            kept += w;
        } else {
            full = 1;
        }
        need += w;
        i += n;
    }
    if (size)
        dst[kept] = '\0';
    return need;
}

char *cp_text_escape_dup(const char *s, size_t len)
{
    size_t need = cp_text_escape(NULL, 0, s, len);
    char *out = malloc(need + 1);
    if (out)
        cp_text_escape(out, need + 1, s, len);
    return out;
}

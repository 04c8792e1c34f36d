/* text: strings from trace files made safe to show (text.h). */
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

void cp_text_clean(char *dst, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t n = cp_utf8_len(u + i, len - i);
        if (n == 0 || (n == 1 && (u[i] < 0x20 || u[i] == 0x7f))) {
            dst[i++] = '?';
            continue;
        }
        memcpy(dst + i, u + i, n);
        i += n;
    }
    dst[len] = '\0';
}

char *cp_text_clean_dup(const char *s, size_t len)
{
    char *out = malloc(len + 1);
    if (out)
        cp_text_clean(out, s, len);
    return out;
}

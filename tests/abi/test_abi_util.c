/* Helpers shared by the ABI tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/abi/test_abi_util.h"

void cp_test_compare_facts(const char *what, const cp_test_fact *real, size_t nreal,
                           const cp_test_fact *ours, size_t nours)
{
    /* Both tables come from one list, so a length or order difference is a bug of the test
     * itself, not of the ABI. */
    assert_int_equal(nreal, nours);
    int bad = 0;
    for (size_t i = 0; i < nreal; i++) {
        assert_string_equal(real[i].expr, ours[i].expr);
        if (real[i].value != ours[i].value) {
            print_error("%s: %s is %lld in the real header, %lld in ours\n", what, real[i].expr,
                        real[i].value, ours[i].value);
            bad++;
        }
    }
    if (bad)
        fail_msg("%d of %zu %s facts differ", bad, nreal, what);
}

static int is_ident(int c)
{
    return isalnum(c) || c == '_';
}

int cp_test_facts_mention(const cp_test_fact *facts, size_t n, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < n; i++) {
        const char *e = facts[i].expr;
        for (const char *p = strstr(e, name); p; p = strstr(p + 1, name)) {
            int left_ok = p == e || !is_ident((unsigned char)p[-1]);
            int right_ok = !is_ident((unsigned char)p[len]);
            if (left_ok && right_ok)
                return 1;
        }
    }
    return 0;
}

char *cp_test_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static int has_prefix(const char *name, const char *const *prefixes)
{
    for (; *prefixes; prefixes++)
        if (strncmp(name, *prefixes, strlen(*prefixes)) == 0)
            return 1;
    return 0;
}

/* Copies the blanked text: comments become spaces, so a name in prose is never taken. */
static char *strip_comments(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(n + 1);
    assert_non_null(out);
    size_t i = 0;
    while (i < n) {
        if (text[i] == '/' && text[i + 1] == '*') {
            const char *end = strstr(text + i + 2, "*/");
            size_t stop = end ? (size_t)(end - text) + 2 : n;
            for (; i < stop; i++)
                out[i] = text[i] == '\n' ? '\n' : ' ';
        } else if (text[i] == '/' && text[i + 1] == '/') {
            for (; i < n && text[i] != '\n'; i++)
                out[i] = ' ';
        } else {
            out[i] = text[i];
            i++;
        }
    }
    out[n] = '\0';
    return out;
}

void cp_test_header_defined_names(const char *text, const char *const *prefixes,
                                  void (*fn)(const char *name, void *ctx), void *ctx)
{
    char *s = strip_comments(text);
    char name[128];
    for (const char *p = s; *p;) {
        int starts = isalpha((unsigned char)*p) || *p == '_';
        if (!starts || (p > s && is_ident((unsigned char)p[-1]))) {
            p++;
            continue;
        }
        const char *start = p;
        while (is_ident((unsigned char)*p))
            p++;
        size_t len = (size_t)(p - start);
        if (len >= sizeof name)
            continue;
        memcpy(name, start, len);
        name[len] = '\0';
        /* `#define NAME`: look back over blanks for "define" after a '#'. */
        const char *back = start;
        while (back > s && (back[-1] == ' ' || back[-1] == '\t'))
            back--;
        int after_define = back - s >= 7 && strncmp(back - 6, "define", 6) == 0 &&
                           !is_ident((unsigned char)back[-7]);
        const char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        int enumerator = q[0] == '=' && q[1] != '=';
        if ((after_define || enumerator) && has_prefix(name, prefixes))
            fn(name, ctx);
    }
    free(s);
}

size_t cp_test_header_nccl_functions(const char *text, const char *const *ret_types,
                                     void (*fn)(const char *name, void *ctx), void *ctx)
{
    size_t found = 0;
    char name[128];
    for (const char *line = text; *line;) {
        const char *next = strchr(line, '\n');
        next = next ? next + 1 : line + strlen(line);
        const char *p = line;
        line = next;
        while (*p == ' ' || *p == '\t')
            p++;
        for (const char *const *rt = ret_types; *rt; rt++) {
            size_t rl = strlen(*rt);
            if (strncmp(p, *rt, rl) != 0)
                continue;
            const char *q = p + rl;
            /* "const char*" may be glued to the name; "ncclResult_t" may not. */
            if (!(q[0] == ' ' || q[0] == '\t' || (*rt)[rl - 1] == '*'))
                continue;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, "nccl", 4) != 0)
                continue;
            const char *start = q;
            while (is_ident((unsigned char)*q))
                q++;
            size_t len = (size_t)(q - start);
            while (*q == ' ' || *q == '\t')
                q++;
            if (*q != '(' || len >= sizeof name)
                continue;
            memcpy(name, start, len);
            name[len] = '\0';
            fn(name, ctx);
            found++;
            break;
        }
    }
    return found;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

long cp_test_elf_dynamic_functions(const char *path, void (*fn)(const char *name, void *ctx),
                                   void *ctx)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    long count = -1;
    Elf64_Shdr *sh = NULL;
    Elf64_Sym *syms = NULL;
    char *strs = NULL;
    Elf64_Ehdr eh;
    struct stat st;
    if (fstat(fd, &st) != 0 || read_at(fd, &eh, sizeof eh, 0) != 0)
        goto out;
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096)
        goto out;
    sh = calloc(eh.e_shnum, sizeof *sh);
    if (!sh || read_at(fd, sh, eh.e_shnum * sizeof *sh, eh.e_shoff) != 0)
        goto out;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        if (sh[i].sh_link >= eh.e_shnum || sh[i].sh_entsize != sizeof(Elf64_Sym))
            goto out;
        const Elf64_Shdr *ss = &sh[sh[i].sh_link];
        if (sh[i].sh_size > (uint64_t)st.st_size || ss->sh_size > (uint64_t)st.st_size)
            goto out;
        syms = malloc(sh[i].sh_size);
        strs = malloc(ss->sh_size + 1);
        if (!syms || !strs || read_at(fd, syms, sh[i].sh_size, sh[i].sh_offset) != 0 ||
            read_at(fd, strs, ss->sh_size, ss->sh_offset) != 0)
            goto out;
        strs[ss->sh_size] = '\0';
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        count = 0;
        for (size_t k = 0; k < n; k++) {
            const Elf64_Sym *s = &syms[k];
            int bind = ELF64_ST_BIND(s->st_info);
            if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF ||
                (bind != STB_GLOBAL && bind != STB_WEAK) || s->st_name >= ss->sh_size)
                continue;
            fn(strs + s->st_name, ctx);
            count++;
        }
        break;
    }
out:
    free(sh);
    free(syms);
    free(strs);
    close(fd);
    return count;
}

struct unchecked_ctx {
    const char *shown;
    const cp_test_fact *facts;
    size_t n;
    int seen, missing;
};

static void check_mentioned(const char *name, void *ctx)
{
    struct unchecked_ctx *m = ctx;
    m->seen++;
    if (!cp_test_facts_mention(m->facts, m->n, name)) {
        print_error("%s defines %s, which no fact in test_abi_facts.h checks\n", m->shown,
                    name);
        m->missing++;
    }
}

int cp_test_unchecked_names(const char *path, const char *shown, const char *const *prefixes,
                            const cp_test_fact *facts, size_t n, int *seen)
{
    char *text = cp_test_read_file(path);
    *seen = 0;
    if (!text)
        return -1;
    struct unchecked_ctx m = {shown, facts, n, 0, 0};
    cp_test_header_defined_names(text, prefixes, check_mentioned, &m);
    free(text);
    *seen = m.seen;
    return m.missing;
}

/* PCRE2's verdicts for the PCRE2 corpus (bench/pcre2/corpus.py builds and runs it).
 *
 * Compiles each pattern as libmodsecurity v3 does (PCRE2_DOTALL | PCRE2_MULTILINE, no
 * UTF mode: pattern and subject are byte strings) and matches values against it.
 *
 * Input lines (hex-encoded bytes):
 *   P <pattern>   compile a pattern; answers "C ok" or "C error <offset> <message>"
 *   V <value>     match the last pattern; answers "M <start> <end>" (group 0),
 *                 "N" (no match) or "E <code>" (a matching error, such as the match
 *                 limit)
 * Build: cc -O2 -o verdicts verdicts.c $(pkg-config --cflags --libs libpcre2-8)
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unhex(const char *s, size_t n, unsigned char *out) {
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        if (sscanf(s + i, "%2x", &v) != 1) return -1;
        out[i / 2] = (unsigned char)v;
    }
    return 0;
}

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    pcre2_code *re = NULL;
    pcre2_match_data *md = NULL;
    unsigned char *buf = NULL;
    size_t bufcap = 0;
    while ((len = getline(&line, &cap, stdin)) > 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len < 1) continue;
        const char *hex = len > 2 ? line + 2 : "";
        size_t hexlen = len > 2 ? (size_t)len - 2 : 0;
        size_t n = hexlen / 2;
        if (n + 1 > bufcap) {
            bufcap = n + 1;
            buf = realloc(buf, bufcap);
        }
        if (unhex(hex, hexlen, buf) != 0) {
            fprintf(stderr, "bad hex\n");
            return 2;
        }
        if (line[0] == 'P') {
            if (md) pcre2_match_data_free(md);
            if (re) pcre2_code_free(re);
            md = NULL;
            int err;
            PCRE2_SIZE off;
            re = pcre2_compile(buf, n, PCRE2_DOTALL | PCRE2_MULTILINE, &err, &off, NULL);
            if (!re) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(err, msg, sizeof msg);
                printf("C error %zu %s\n", (size_t)off, (char *)msg);
            } else {
                md = pcre2_match_data_create_from_pattern(re, NULL);
                printf("C ok\n");
            }
        } else if (line[0] == 'V') {
            if (!re) {
                printf("E none\n");
            } else {
                int rc = pcre2_match(re, buf, n, 0, 0, md, NULL);
                if (rc >= 0) {
                    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                    printf("M %zu %zu\n", (size_t)ov[0], (size_t)ov[1]);
                } else if (rc == PCRE2_ERROR_NOMATCH) {
                    printf("N\n");
                } else {
                    printf("E %d\n", rc);
                }
            }
        } else {
            fprintf(stderr, "bad line\n");
            return 2;
        }
    }
    return 0;
}

/*
 * Replays every file of the committed fuzz corpus through the fuzz targets'
 * entry point (no clang needed), so the suite keeps exercising them under
 * the sanitizers. Usage: fuzz_corpus_replay DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The whole of @p path into a new buffer; 0, or 1 with the reason on stderr. */
static int read_file(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    uint8_t *buf = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n + 1) : NULL;
    if (buf == NULL) {
        fprintf(stderr, "cannot read %s (size %ld)\n", path, n);
        fclose(f);
        return 1;
    }
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    *out = buf;
    return 0;
}

static int replay_dir(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "cannot open %s\n", dir);
        return 1;
    }
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        uint8_t *buf = NULL;
        size_t got = 0;
        if (read_file(path, &buf, &got) != 0) { /* a corpus file not replayed fails the run */
            closedir(d);
            return 1;
        }
        LLVMFuzzerTestOneInput(buf, got);
        free(buf);
        (*count)++;
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    int count = 0, bad = 0;
    for (int i = 1; i < argc; i++)
        bad |= replay_dir(argv[i], &count);
    printf("replayed %d inputs\n", count);
    return (bad || count == 0) ? 1 : 0;
}

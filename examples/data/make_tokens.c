/*
 * make_tokens IN.txt OUT.bin - char-level tokenizer for the example data:
 * every byte of the text becomes one token (its value, 0..255), written as a
 * flat little-endian uint16 file (the nanoGPT .bin layout that
 * dt_token_data_open reads). Run by the build; see CMakeLists.txt.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN.txt OUT.bin\n", argv[0]);
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (in == NULL) {
        fprintf(stderr, "make_tokens: cannot open %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    FILE *out = fopen(argv[2], "wb");
    if (out == NULL) {
        fprintf(stderr, "make_tokens: cannot create %s: %s\n", argv[2], strerror(errno));
        fclose(in);
        return 1;
    }
    long n = 0;
    int c;
    while ((c = fgetc(in)) != EOF) {
        unsigned char le[2] = {(unsigned char)c, 0}; /* id = byte value, little-endian */
        if (fwrite(le, 1, 2, out) != 2) {
            fprintf(stderr, "make_tokens: write to %s failed: %s\n", argv[2], strerror(errno));
            fclose(in);
            fclose(out);
            return 1;
        }
        n++;
    }
    fclose(in);
    if (fclose(out) != 0) {
        fprintf(stderr, "make_tokens: closing %s failed: %s\n", argv[2], strerror(errno));
        return 1;
    }
    printf("make_tokens: %ld tokens -> %s\n", n, argv[2]);
    return 0;
}

/* Stands in for an ABI test whose toolkit part is not installed: says why, exits 77, which
 * ctest reports as skipped (SKIP_RETURN_CODE). */
#include <stdio.h>

int main(int argc, char **argv)
{
    printf("skipped: %s\n", argc > 1 ? argv[1] : "a CUDA toolkit file is missing");
    return 77;
}

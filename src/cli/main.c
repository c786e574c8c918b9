/* Placeholder until the program lands. */
#include <stdio.h>
int main(void) { puts("spk: not built yet"); return 1; }

/* A program that does what `import torch; conv(...)` does: dlopen() libtorch_cuda.so, run a
 * "convolution".  Linked with no RPATH of its own; prints the loader's error when it fails. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s /path/to/libtorch_cuda.so\n", argv[0]);
        return 2;
    }
    void *handle = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
        printf("load failed: %s\n", dlerror());
        return 3;
    }
    int (*conv)(int) = (int (*)(int))dlsym(handle, "torch_conv");
    int result = conv(20);
    printf("torch_conv(20) = %d\n", result);
    return result == 41 ? 0 : 1;
}

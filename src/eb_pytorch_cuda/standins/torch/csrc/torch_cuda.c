/* Stand-in for libtorch_cuda.so: linked against libcudnn.so.N with DT_RPATH to the cuDNN install,
 * the way EasyBuild's RPATH wrappers link the real one. */
int cudnnConvolutionForward(int x);

int torch_conv(int x)
{
    return cudnnConvolutionForward(x);
}

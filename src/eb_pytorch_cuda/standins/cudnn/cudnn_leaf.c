/* Stand-in for libcudnn_cnn_train.so.8 / libcudnn_engines_*.so.9 and the other sub-libraries. */
int cudnn_leaf_kernel(int x)
{
    return 2 * x;
}

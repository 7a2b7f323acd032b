"""CPU-speed kernels of the models: the faster float32 GEMM of the two CPU libraries
(``linear``) and the output projection + cross-entropy in row chunks (``fused_loss``)."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def depthwise_conv2d_kernel(
    x_ptr, w_ptr, y_ptr, C, MULT, H, W, OC, OH, OW, sh, sw, ph, pw, dh, dw, KH: tl.constexpr, KW: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Program (n * OC + oc, oh, block of ow): taps summed in (kh, kw) order in fp32.
    plane = tl.program_id(0).to(tl.int64)
    oh = tl.program_id(1)
    ow = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
    n = plane // OC
    oc = plane % OC
    x_base = x_ptr + (n * C + oc // MULT) * H * W
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(KH):
        ih = tl.zeros([BLOCK], dtype=tl.int32) + (oh * sh - ph + i * dh)  # a vector, so the mask is one
        for j in tl.static_range(KW):
            iw = ow * sw - pw + j * dw
            mask = (iw >= 0) & (iw < W) & (ih >= 0) & (ih < H) & (ow < OW)
            v = tl.load(x_base + ih * W + iw, mask=mask, other=0.0)
            acc += v * tl.load(w_ptr + oc * KH * KW + i * KW + j)
    tl.store(y_ptr + plane * OH * OW + oh * OW + ow, acc, mask=ow < OW)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, bias: bool = False):
        super().__init__()
        if bias:
            raise ValueError("this answer covers the task's bias-free convolution")
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride, padding=padding, groups=in_channels, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = self.conv2d
        x = x.contiguous()
        w = conv.weight.contiguous()
        batch, channels, height, width = x.shape
        out_channels, _, kh, kw = w.shape
        (sh, sw), (ph, pw), (dh, dw) = conv.stride, conv.padding, conv.dilation
        oh = (height + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (width + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        y = torch.empty((batch, out_channels, oh, ow), device=x.device, dtype=x.dtype)
        block = 256
        depthwise_conv2d_kernel[(batch * out_channels, oh, triton.cdiv(ow, block))](
            x, w, y, channels, out_channels // channels, height, width, out_channels, oh, ow, sh, sw, ph, pw, dh, dw,
            KH=kh, KW=kw, BLOCK=block, num_warps=4,
        )
        return y

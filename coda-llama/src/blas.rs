//! Plain GEMMs through cuBLAS (loaded at run time): the weight gradients
//! `dW = dyᵀ · x` of the block's backward and the LM head.

use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::driver::CudaStream;
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};

use coda_runtime::{AnyTensor, Element, Error, LaunchKind, Span, Stream, TensorMut, TensorRef, bf16};

/// A cuBLAS handle bound to one stream.
pub struct Cublas {
    blas: CudaBlas,
    /// The stream the handle enqueues on.
    stream: Arc<CudaStream>,
}

/// How an operand is stored, row-major, relative to the product it enters.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// As used: `A` `[M, K]`, `B` `[K, N]`.
    Plain,
    /// Transposed: `A` `[K, M]`, `B` `[N, K]` (e.g. a `Linear` weight).
    Transposed,
}

fn rank2(name: &str, t: &dyn AnyTensor) -> Result<(usize, usize), Error> {
    match *t.dims() {
        [r, c] if r > 0 && c > 0 => Ok((r, c)),
        _ => Err(Error::arg(name, format!("must be a non-empty rank-2 tensor, got shape {:?}", t.dims()))),
    }
}

fn fits_i32(name: &str, dims: &[usize]) -> Result<(), Error> {
    if dims.iter().all(|&d| d <= i32::MAX as usize) {
        Ok(())
    } else {
        Err(Error::arg(name, format!("dimensions {dims:?} exceed 2^31 - 1")))
    }
}

fn handle_stream(handle: &Arc<CudaStream>, stream: &Stream) -> Result<(), Error> {
    if Arc::ptr_eq(handle, stream.cuda()) {
        Ok(())
    } else {
        Err(Error::arg("stream", "is not the stream the cuBLAS handle was created on, which its GEMMs run on"))
    }
}

/// The shapes of `op(a) · op(b)` into `c`: `(M, N, K)`, after the rules
/// (rank 2, matching K, `c` `[M, N]`, 32-bit dims, tensors of `stream`).
pub fn check_gemm(
    handle: &Arc<CudaStream>,
    stream: &Stream,
    (an, a, sa): (&str, &dyn AnyTensor, Stored),
    (bn, b, sb): (&str, &dyn AnyTensor, Stored),
    c: &dyn AnyTensor,
) -> Result<(usize, usize, usize), Error> {
    handle_stream(handle, stream)?;
    let (ar, ac) = rank2(an, a)?;
    let (br, bc) = rank2(bn, b)?;
    let (m, k) = if sa == Stored::Plain { (ar, ac) } else { (ac, ar) };
    let (kb, n) = if sb == Stored::Plain { (br, bc) } else { (bc, br) };
    if kb != k {
        return Err(Error::arg(bn, format!("shape {:?} does not match K = {k} of `{an}` {:?}", b.dims(), a.dims())));
    }
    if c.dims() != [m, n] {
        return Err(Error::arg("out", format!("shape {:?} must be [{m}, {n}]", c.dims())));
    }
    fits_i32(an, a.dims())?;
    fits_i32(bn, b.dims())?;
    for (name, t) in [(an, a), (bn, b), ("out", c)] {
        if !t.on_stream(stream) {
            return Err(Error::arg(name, "was allocated on another stream; use tensors of the cuBLAS stream"));
        }
    }
    Ok((m, n, k))
}

impl Cublas {
    /// Refuses `stream` unless it is the one the handle was made on, which its GEMMs run on.
    pub fn check_stream(&self, stream: &Stream) -> Result<(), Error> {
        handle_stream(&self.stream, stream)
    }

    pub fn new(stream: &Stream) -> Result<Cublas, Error> {
        // SAFETY: only probes whether libcublas can be loaded.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(Error::Library { library: "cuBLAS", message: "libcublas is not on the library path".into() });
        }
        let blas = CudaBlas::new(stream.cuda().clone())
            .map_err(|e| Error::Library { library: "cuBLAS", message: format!("creating a handle: {e:?}") })?;
        Ok(Cublas { blas, stream: stream.cuda().clone() })
    }

    /// `y[M, N] = x[M, K] · w[N, K]ᵀ` (a `Linear` forward), bf16 out.
    pub fn linear(&self, stream: &Stream, x: &dyn TensorRef<bf16>, w: &dyn TensorRef<bf16>, y: &mut dyn TensorMut<bf16>) -> Result<(), Error> {
        self.gemm(stream, ("x", x, Stored::Plain), ("w", w, Stored::Transposed), y, false)
    }

    /// `c[M, N] = a[M, K] · b[K, N]` (an input gradient `dy · W`), bf16 out.
    pub fn matmul(&self, stream: &Stream, a: &dyn TensorRef<bf16>, b: &dyn TensorRef<bf16>, c: &mut dyn TensorMut<bf16>) -> Result<(), Error> {
        self.gemm(stream, ("a", a, Stored::Plain), ("b", b, Stored::Plain), c, false)
    }

    /// The weight gradient `dw[N, K] (+)= dy[M, N]ᵀ · x[M, K]`, summed in f32
    /// and written as `dw`'s element (f32 or bf16: rounded once); with
    /// `accumulate` it adds to `dw` (e.g. over chunks of rows, best in f32).
    pub fn weight_grad<T: Element>(
        &self,
        stream: &Stream,
        dy: &dyn TensorRef<bf16>,
        x: &dyn TensorRef<bf16>,
        dw: &mut dyn TensorMut<T>,
        accumulate: bool,
    ) -> Result<(), Error> {
        self.gemm(stream, ("dy", dy, Stored::Transposed), ("x", x, Stored::Plain), dw, accumulate)
    }

    /// Row-major `c[M, N] (+)= op(a) · op(b)`, bf16 operands, f32 accumulation.
    fn gemm<T: Element>(
        &self,
        stream: &Stream,
        (an, a, sa): (&str, &dyn TensorRef<bf16>, Stored),
        (bn, b, sb): (&str, &dyn TensorRef<bf16>, Stored),
        c: &mut dyn TensorMut<T>,
        accumulate: bool,
    ) -> Result<(), Error> {
        let (m, n, k) = check_gemm(&self.stream, stream, (an, a, sa), (bn, b, sb), c.as_any())?;
        let (ac, bc) = (a.dims()[1], b.dims()[1]);
        let c_type = match T::DTYPE {
            coda_runtime::dsl::ir::DType::Bf16 => cudaDataType::CUDA_R_16BF,
            coda_runtime::dsl::ir::DType::F32 => cudaDataType::CUDA_R_32F,
            coda_runtime::dsl::ir::DType::I32 | coda_runtime::dsl::ir::DType::E4m3 | coda_runtime::dsl::ir::DType::E5m2 => {
                return Err(Error::arg("out", "must be bf16 or f32"));
            }
        };
        // Row-major C[M, N] is column-major Cᵀ[N, M] = op(B)ᵀ · op(A)ᵀ: cuBLAS
        // sees B first; a row-major operand stored as used is its own column-major transpose.
        let op = |s: Stored| if s == Stored::Plain { cublasOperation_t::CUBLAS_OP_N } else { cublasOperation_t::CUBLAS_OP_T };
        let (alpha, beta) = (1.0f32, if accumulate { 1.0f32 } else { 0.0 });
        stream.cuda().context().bind_to_thread()?;
        let c_bytes = c.as_any().bytes();
        let ((pa, _ra), (pb, _rb), (pc, _wc)) = (a.read_ptr(stream), b.read_ptr(stream), c.write_ptr(stream));
        coda_runtime::check_disjoint(&[
            Span { name: an, address: pa, bytes: a.bytes(), written: false },
            Span { name: bn, address: pb, bytes: b.bytes(), written: false },
            Span { name: "out", address: pc, bytes: c_bytes, written: true },
        ])?;
        stream.count(LaunchKind::Blas);
        // SAFETY: the shapes checked above bound every access; all three live
        // on the handle's stream; `out` overlaps neither operand.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *self.blas.handle(),
                op(sb),
                op(sa),
                n as i32,
                m as i32,
                k as i32,
                &alpha as *const f32 as *const _,
                pb as *const _,
                cudaDataType::CUDA_R_16BF,
                bc as i32,
                pa as *const _,
                cudaDataType::CUDA_R_16BF,
                ac as i32,
                &beta as *const f32 as *const _,
                pc as *mut _,
                c_type,
                n as i32,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| Error::Library { library: "cuBLAS", message: format!("gemm: {e:?}") })
    }
}

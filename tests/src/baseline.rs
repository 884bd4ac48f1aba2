//! The bare-GEMM baseline our fused ops are measured against: cuBLASLt (the
//! path PyTorch's `F.linear` takes on Hopper), loaded at run time.

use std::sync::Arc;

use cudarc::cublaslt::{CudaBlasLT, Matmul, MatmulConfig};
use cudarc::driver::CudaStream;

use coda_llama::blas::{Stored, check_gemm};
use coda_runtime::{Error, LaunchKind, Stream, Tensor, bf16};

/// A cuBLASLt handle on one stream, with its 32 MiB workspace: the bare
/// GEMMs our fused ops are measured against (the path PyTorch's `F.linear`
/// takes on Hopper), algorithm from cuBLASLt's heuristic.
pub struct CublasLt {
    lt: CudaBlasLT,
    /// The stream the handle enqueues on.
    stream: Arc<CudaStream>,
}

impl CublasLt {
    pub fn new(stream: &Stream) -> Result<CublasLt, Error> {
        // SAFETY: only probes whether libcublasLt can be loaded.
        if !unsafe { cudarc::cublaslt::sys::is_culib_present() } {
            return Err(Error::Library { library: "cuBLASLt", message: "libcublasLt is not on the library path".into() });
        }
        let lt = CudaBlasLT::new(stream.cuda().clone()).map_err(|e| Error::Library { library: "cuBLASLt", message: format!("creating a handle: {e:?}") })?;
        Ok(CublasLt { lt, stream: stream.cuda().clone() })
    }

    /// `y[M, N] = x[M, K] · w[N, K]ᵀ` (a `Linear` forward), bf16 out.
    pub fn linear(&self, stream: &Stream, x: &Tensor<bf16>, w: &Tensor<bf16>, y: &mut Tensor<bf16>) -> Result<(), Error> {
        self.gemm(stream, ("x", x, Stored::Plain), ("w", w, Stored::Transposed), y)
    }

    /// `c[M, N] = a[M, K] · b[K, N]` (an input gradient `dy · W`), bf16 out.
    pub fn matmul(&self, stream: &Stream, a: &Tensor<bf16>, b: &Tensor<bf16>, c: &mut Tensor<bf16>) -> Result<(), Error> {
        self.gemm(stream, ("a", a, Stored::Plain), ("b", b, Stored::Plain), c)
    }

    fn gemm(
        &self,
        stream: &Stream,
        (an, a, sa): (&str, &Tensor<bf16>, Stored),
        (bn, b, sb): (&str, &Tensor<bf16>, Stored),
        c: &mut Tensor<bf16>,
    ) -> Result<(), Error> {
        let (m, n, k) = check_gemm(&self.stream, stream, (an, a, sa), (bn, b, sb), &*c)?;
        // Column-major as in `Cublas::gemm`: Cᵀ[N, M] = op(B)ᵀ · op(A)ᵀ.
        let cfg = MatmulConfig {
            transa: sb == Stored::Transposed,
            transb: sa == Stored::Transposed,
            transc: false,
            m: n as u64,
            n: m as u64,
            k: k as u64,
            alpha: 1.0,
            lda: b.shape()[1] as i64,
            ldb: a.shape()[1] as i64,
            beta: 0.0,
            ldc: n as i64,
            stride_a: None,
            stride_b: None,
            stride_c: None,
            stride_bias: None,
            batch_size: None,
        };
        stream.cuda().context().bind_to_thread()?;
        stream.count(LaunchKind::Blas);
        // SAFETY: the shapes checked above bound every access; all three live on the handle's stream.
        unsafe { self.lt.matmul(cfg, b.slice(), a.slice(), &mut c.view_mut(), None, None) }
            .map_err(|e| Error::Library { library: "cuBLASLt", message: format!("matmul: {e:?}") })
    }
}

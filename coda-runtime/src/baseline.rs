//! cuBLAS baselines timed next to our kernels (libcublas is loaded at run time).

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys::cublasOperation_t};

use crate::{Error, Stream, Tensor, bf16};

/// A plain `Y = X · Wᵀ` through cuBLAS (bf16 in and out, f32 accumulation).
pub struct Cublas {
    blas: CudaBlas,
}

impl Cublas {
    pub fn new(stream: &Stream) -> Result<Cublas, Error> {
        // SAFETY: only probes whether libcublas can be loaded.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(Error::NoDevice("libcublas is not on the library path".into()));
        }
        let blas = CudaBlas::new(stream.cuda().clone()).map_err(|e| Error::NoDevice(format!("cuBLAS: {e:?}")))?;
        Ok(Cublas { blas })
    }

    /// `y[M, N] = x[M, K] · w[N, K]ᵀ`, all row-major.
    pub fn linear(&self, x: &Tensor<bf16>, w: &Tensor<bf16>, y: &mut Tensor<bf16>) -> Result<(), Error> {
        let (&[m, k], &[n, kw]) = (x.shape(), w.shape()) else {
            return Err(Error::arg("x", "x and w must be rank 2"));
        };
        if kw != k || y.shape() != [m, n] {
            return Err(Error::arg("y", format!("shapes x {:?}, w {:?}, y {:?} do not form [M,K]·[N,K]ᵀ = [M,N]", x.shape(), w.shape(), y.shape())));
        }
        // Row-major Y[M,N] is column-major Yᵀ[N,M] = W · Xᵀ: op(A) = W (transposed), op(B) = Xᵀ.
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_T,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            alpha: bf16::ONE,
            lda: k as i32,
            ldb: k as i32,
            beta: bf16::ZERO,
            ldc: n as i32,
        };
        // SAFETY: the shapes above bound every access.
        unsafe { self.blas.gemm(cfg, w.slice(), x.slice(), y.slice_mut()) }
            .map_err(|e| Error::NoDevice(format!("cuBLAS gemm: {e:?}")))
    }
}

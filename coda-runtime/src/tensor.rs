use std::ops::Range;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};

use crate::dsl::ir::DType;
use crate::{Error, Stream};

/// Element types a [`Tensor`] can hold.
pub trait Element: DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin + 'static {
    const DTYPE: DType;
}

impl Element for half::bf16 {
    const DTYPE: DType = DType::Bf16;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}

/// A dense row-major device tensor (rank 1 or 2) on one stream's device.
pub struct Tensor<T: Element> {
    data: CudaSlice<T>,
    shape: Vec<usize>,
}

impl<T: Element> Tensor<T> {
    /// Copies `host` (row-major, `shape.iter().product()` elements) to the device.
    pub fn from_host(stream: &Stream, host: &[T], shape: &[usize]) -> Result<Self, Error> {
        let want: usize = shape.iter().product();
        if host.len() != want {
            return Err(Error::arg("host", format!("{} elements for shape {shape:?} ({want} needed)", host.len())));
        }
        Ok(Tensor { data: stream.cuda().clone_htod(host)?, shape: shape.to_vec() })
    }

    pub fn zeros(stream: &Stream, shape: &[usize]) -> Result<Self, Error> {
        Ok(Tensor { data: stream.cuda().alloc_zeros(shape.iter().product())?, shape: shape.to_vec() })
    }

    /// Fills every byte with 0xFF (NaN for bf16 and f32): outputs are poisoned
    /// before a launch so that an unwritten element cannot pass a check.
    pub fn poison(&mut self, stream: &Stream) -> Result<(), Error> {
        let bytes = self.data.num_bytes();
        let (ptr, _sync) = self.data.device_ptr_mut(stream.cuda());
        // SAFETY: ptr addresses `bytes` bytes of this allocation, ordered on the stream.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0xFF, bytes, stream.cuda().cu_stream())? };
        Ok(())
    }

    pub fn to_host(&self, stream: &Stream) -> Result<Vec<T>, Error> {
        Ok(stream.cuda().clone_dtoh(&self.data)?)
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.len() == 0
    }

    pub fn slice(&self) -> &CudaSlice<T> {
        &self.data
    }

    pub fn slice_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.data
    }

    /// Rows `range` of the leading dimension, as an input argument.
    pub fn rows(&self, range: Range<usize>) -> Result<Rows<'_, T>, Error> {
        let (start, shape) = row_range(&self.shape, &range)?;
        Ok(Rows { base: self, start, shape })
    }

    /// Rows `range` of the leading dimension, as an output argument.
    pub fn rows_mut(&mut self, range: Range<usize>) -> Result<RowsMut<'_, T>, Error> {
        let (start, shape) = row_range(&self.shape, &range)?;
        Ok(RowsMut { base: self, start, shape })
    }
}

/// The element offset and shape of rows `range` of a tensor of `shape`.
fn row_range(shape: &[usize], range: &Range<usize>) -> Result<(usize, Vec<usize>), Error> {
    if range.start >= range.end || range.end > shape[0] {
        return Err(Error::arg("rows", format!("range {range:?} must be non-empty and within the {} rows", shape[0])));
    }
    let row: usize = shape[1..].iter().product();
    let mut sub = shape.to_vec();
    sub[0] = range.len();
    Ok((range.start * row, sub))
}

/// A run of whole rows of a tensor, borrowed as a launch input.
pub struct Rows<'a, T: Element> {
    base: &'a Tensor<T>,
    start: usize,
    shape: Vec<usize>,
}

/// A run of whole rows of a tensor, borrowed as a launch output.
pub struct RowsMut<'a, T: Element> {
    base: &'a mut Tensor<T>,
    start: usize,
    shape: Vec<usize>,
}

/// A tensor (or rows of one) of element type `T`, readable by a launch.
pub trait TensorRef<T: Element>: AnyTensor {}
/// A tensor (or rows of one) of element type `T`, writable by a launch.
pub trait TensorMut<T: Element>: AnyTensor {}

impl<T: Element> TensorRef<T> for Tensor<T> {}
impl<T: Element> TensorMut<T> for Tensor<T> {}
impl<T: Element> TensorRef<T> for Rows<'_, T> {}
impl<T: Element> TensorRef<T> for RowsMut<'_, T> {}
impl<T: Element> TensorMut<T> for RowsMut<'_, T> {}

/// A type-erased tensor argument of a launch.
pub enum TensorArg<'a> {
    In(&'a dyn AnyTensor),
    Out(&'a mut dyn AnyTensor),
}

impl<'a> TensorArg<'a> {
    pub fn input<T: Element>(t: &'a dyn TensorRef<T>) -> Self {
        TensorArg::In(t)
    }
    pub fn output<T: Element>(t: &'a mut dyn TensorMut<T>) -> Self {
        TensorArg::Out(t)
    }
    pub(crate) fn tensor(&self) -> &dyn AnyTensor {
        match self {
            TensorArg::In(t) => *t,
            TensorArg::Out(t) => &**t,
        }
    }
}

/// What a launch needs to know of a tensor, whatever its element type.
pub trait AnyTensor {
    fn dtype(&self) -> DType;
    fn dims(&self) -> &[usize];
    fn bytes(&self) -> usize;
    fn ordinal(&self) -> usize;
    /// Whether the tensor was allocated on `stream` (launches are ordered on it).
    fn on_stream(&self, stream: &Stream) -> bool;
    /// The device address. Work on it is ordered by the tensor's own stream,
    /// which launches require to be the launch stream.
    fn address(&self, stream: &Stream) -> u64;
}

impl<T: Element> AnyTensor for Tensor<T> {
    fn dtype(&self) -> DType {
        T::DTYPE
    }
    fn dims(&self) -> &[usize] {
        &self.shape
    }
    fn bytes(&self) -> usize {
        self.data.num_bytes()
    }
    fn ordinal(&self) -> usize {
        self.data.ordinal()
    }
    fn on_stream(&self, stream: &Stream) -> bool {
        std::sync::Arc::ptr_eq(self.data.stream(), stream.cuda())
    }
    fn address(&self, stream: &Stream) -> u64 {
        self.data.device_ptr(stream.cuda()).0
    }
}

macro_rules! rows_any_tensor {
    ($ty:ident) => {
        impl<T: Element> AnyTensor for $ty<'_, T> {
            fn dtype(&self) -> DType {
                T::DTYPE
            }
            fn dims(&self) -> &[usize] {
                &self.shape
            }
            fn bytes(&self) -> usize {
                self.shape.iter().product::<usize>() * std::mem::size_of::<T>()
            }
            fn ordinal(&self) -> usize {
                self.base.ordinal()
            }
            fn on_stream(&self, stream: &Stream) -> bool {
                self.base.on_stream(stream)
            }
            fn address(&self, stream: &Stream) -> u64 {
                self.base.address(stream) + (self.start * std::mem::size_of::<T>()) as u64
            }
        }
    };
}
rows_any_tensor!(Rows);
rows_any_tensor!(RowsMut);

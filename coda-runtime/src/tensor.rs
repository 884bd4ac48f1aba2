use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr, SyncOnDrop, ValidAsZeroBits};

use crate::dsl::ir::DType;
use crate::{Error, Stream};

/// Element types a [`Tensor`] can hold: these five, sealed. Finishers and
/// cuBLAS take the element width from `DTYPE`, so a type of another size
/// claiming one (and a `TensorMut` of it over a tensor of another) would let
/// safe code write past an allocation.
pub trait Element: sealed::Element + DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin + 'static {
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
impl Element for float8::F8E4M3 {
    const DTYPE: DType = DType::E4m3;
}
impl Element for float8::F8E5M2 {
    const DTYPE: DType = DType::E5m2;
}

impl<T: Element> std::fmt::Debug for Tensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor<{:?}>{:?}", T::DTYPE, self.shape)
    }
}

/// The element count of `shape`, refusing shapes whose size overflows.
pub(crate) fn checked_len<T>(shape: &[usize]) -> Result<usize, Error> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|n| n.checked_mul(std::mem::size_of::<T>()).is_some_and(|b| b <= isize::MAX as usize))
        .ok_or_else(|| Error::arg("shape", format!("{shape:?} has more bytes than memory can address")))
}

/// Bytes of a dense `shape` of `T`s, for shapes [`checked_len`] accepted
/// (or within an allocation that it accepted): no overflow.
pub(crate) fn span_bytes<T>(shape: &[usize]) -> usize {
    shape.iter().product::<usize>() * std::mem::size_of::<T>()
}

/// A dense row-major device tensor (rank 1 or 2) on one stream's device.
///
/// Its allocation always holds exactly `shape.iter().product()` elements:
/// nothing hands out the allocation itself mutably, so launches may trust it.
pub struct Tensor<T: Element> {
    data: CudaSlice<T>,
    shape: Vec<usize>,
}

impl<T: Element> Tensor<T> {
    /// Copies `host` (row-major, `shape.iter().product()` elements) to the device.
    pub fn from_host(stream: &Stream, host: &[T], shape: &[usize]) -> Result<Self, Error> {
        let want = checked_len::<T>(shape)?;
        if host.len() != want {
            return Err(Error::arg("host", format!("{} elements for shape {shape:?} ({want} needed)", host.len())));
        }
        Ok(Tensor { data: stream.cuda().clone_htod(host)?, shape: shape.to_vec() })
    }

    pub fn zeros(stream: &Stream, shape: &[usize]) -> Result<Self, Error> {
        let len = checked_len::<T>(shape)?;
        Ok(Tensor { data: stream.cuda().alloc_zeros(len)?, shape: shape.to_vec() })
    }

    /// The stream the tensor was allocated on, which orders work on it.
    fn own_stream(&self) -> Arc<CudaStream> {
        self.data.stream().clone()
    }

    /// Fills every byte with 0xFF (NaN for bf16 and f32), on the tensor's own
    /// stream: outputs are poisoned before a launch so that an unwritten
    /// element cannot pass a check.
    pub fn poison(&mut self) -> Result<(), Error> {
        let stream = self.own_stream();
        stream.context().bind_to_thread()?;
        let bytes = self.data.num_bytes();
        let (ptr, _record) = self.data.device_ptr_mut(&stream);
        // SAFETY: ptr addresses `bytes` bytes of this allocation, ordered on its own stream.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0xFF, bytes, stream.cu_stream())? };
        Ok(())
    }

    /// Copies the tensor to the host, ordered after every launch that wrote it.
    pub fn to_host(&self) -> Result<Vec<T>, Error> {
        Ok(self.own_stream().clone_dtoh(&self.data)?)
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

    /// The allocation, for reading it with other CUDA libraries.
    pub fn slice(&self) -> &CudaSlice<T> {
        &self.data
    }

    /// A mutable view of the whole allocation, for writing it with other CUDA
    /// libraries (a view, so the allocation itself cannot be replaced).
    pub fn view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.data.as_view_mut()
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
pub(crate) fn row_range(shape: &[usize], range: &Range<usize>) -> Result<(usize, Vec<usize>), Error> {
    let Some(&rows) = shape.first() else {
        return Err(Error::arg("rows", "a rank-0 tensor has no rows"));
    };
    if range.start >= range.end || range.end > rows {
        return Err(Error::arg("rows", format!("range {range:?} must be non-empty and within the {rows} rows")));
    }
    let row: usize = shape[1..].iter().product();
    let mut sub = shape.to_vec();
    sub[0] = range.len();
    Ok((range.start * row, sub))
}

/// A tensor whose runs of whole rows (of its leading dimension) can be
/// launch arguments: a chunk of tokens, say. A range that is empty or past
/// the rows is [`Error::Arg`] `rows`.
pub trait RowSlices<T: Element>: TensorRef<T> {
    /// Rows `range`, as an input.
    fn row_slice(&self, range: Range<usize>) -> Result<impl TensorRef<T> + '_, Error>;
    /// Rows `range`, as an output.
    fn row_slice_mut(&mut self, range: Range<usize>) -> Result<impl TensorMut<T> + '_, Error>;
}

impl<T: Element> RowSlices<T> for Tensor<T> {
    fn row_slice(&self, range: Range<usize>) -> Result<impl TensorRef<T> + '_, Error> {
        self.rows(range)
    }
    fn row_slice_mut(&mut self, range: Range<usize>) -> Result<impl TensorMut<T> + '_, Error> {
        self.rows_mut(range)
    }
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

pub(crate) mod sealed {
    pub trait Sealed {}
    pub trait Element {}
    impl Element for half::bf16 {}
    impl Element for f32 {}
    impl Element for i32 {}
    impl Element for float8::F8E4M3 {}
    impl Element for float8::F8E5M2 {}
    impl<T: super::Element> Sealed for super::Tensor<T> {}
    impl<T: super::Element> Sealed for super::Rows<'_, T> {}
    impl<T: super::Element> Sealed for super::RowsMut<'_, T> {}
}

/// A tensor (or rows of one) of element type `T`, readable by a launch.
pub trait TensorRef<T: Element>: AnyTensor {}
/// A tensor (or rows of one) of element type `T`, writable by a launch.
pub trait TensorMut<T: Element>: AnyTensorMut {}

impl<T: Element> TensorRef<T> for Tensor<T> {}
impl<T: Element> TensorMut<T> for Tensor<T> {}
impl<T: Element> TensorRef<T> for Rows<'_, T> {}
impl<T: Element> TensorRef<T> for RowsMut<'_, T> {}
impl<T: Element> TensorMut<T> for RowsMut<'_, T> {}

/// A type-erased tensor argument of a launch: its direction is checked
/// against the parameter's.
pub enum TensorArg<'a> {
    In(&'a dyn AnyTensor),
    Out(&'a mut dyn AnyTensorMut),
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
            TensorArg::Out(t) => t.as_any(),
        }
    }
}

/// What a launch needs to know of a tensor, whatever its element type.
/// Sealed: only this crate's tensors and views, whose sizes it trusts.
pub trait AnyTensor: sealed::Sealed {
    fn dtype(&self) -> DType;
    fn dims(&self) -> &[usize];
    /// Bytes the argument spans: `product(dims) × element size`.
    fn bytes(&self) -> usize;
    fn ordinal(&self) -> usize;
    /// Whether the tensor was allocated on `stream` (launches are ordered on it).
    fn on_stream(&self, stream: &Stream) -> bool;
    /// The device address for reading on `stream`. Keep the guard until the
    /// work is enqueued: dropping it records the read, so that later writers
    /// on other streams wait for it.
    fn read_ptr<'s>(&'s self, stream: &'s Stream) -> (u64, SyncOnDrop<'s>);
}

/// A tensor a launch may write.
pub trait AnyTensorMut: AnyTensor {
    /// The device address for writing on `stream`; dropping the guard
    /// records the write, so that later readers on other streams wait for it.
    fn write_ptr<'s>(&'s mut self, stream: &'s Stream) -> (u64, SyncOnDrop<'s>);
    fn as_any(&self) -> &dyn AnyTensor;
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
        Arc::ptr_eq(self.data.stream(), stream.cuda())
    }
    fn read_ptr<'s>(&'s self, stream: &'s Stream) -> (u64, SyncOnDrop<'s>) {
        self.data.device_ptr(stream.cuda())
    }
}

impl<T: Element> AnyTensorMut for Tensor<T> {
    fn write_ptr<'s>(&'s mut self, stream: &'s Stream) -> (u64, SyncOnDrop<'s>) {
        self.data.device_ptr_mut(stream.cuda())
    }
    fn as_any(&self) -> &dyn AnyTensor {
        self
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
                // Within the base tensor's allocation (checked by `row_range`).
                span_bytes::<T>(&self.shape)
            }
            fn ordinal(&self) -> usize {
                self.base.ordinal()
            }
            fn on_stream(&self, stream: &Stream) -> bool {
                self.base.on_stream(stream)
            }
            fn read_ptr<'s>(&'s self, stream: &'s Stream) -> (u64, SyncOnDrop<'s>) {
                let (p, g) = self.base.read_ptr(stream);
                (p + (self.start * std::mem::size_of::<T>()) as u64, g)
            }
        }
    };
}
rows_any_tensor!(Rows);
rows_any_tensor!(RowsMut);

impl<T: Element> AnyTensorMut for RowsMut<'_, T> {
    fn write_ptr<'s>(&'s mut self, stream: &'s Stream) -> (u64, SyncOnDrop<'s>) {
        let offset = (self.start * std::mem::size_of::<T>()) as u64;
        let (p, g) = self.base.write_ptr(stream);
        (p + offset, g)
    }
    fn as_any(&self) -> &dyn AnyTensor {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shapes whose byte size overflows are refused instead of wrapping to a
    /// small allocation; a rank-0 tensor has no rows to view.
    #[test]
    fn sizes_never_wrap_and_rows_need_a_rank() {
        assert_eq!(checked_len::<f32>(&[1000, 520]).unwrap(), 520_000);
        assert!(checked_len::<f32>(&[1 << 62, 4]).is_err(), "element count overflows");
        assert!(checked_len::<f32>(&[1 << 61, 2]).is_err(), "byte count overflows");
        assert!(row_range(&[], &(0..1)).is_err());
        assert!(row_range(&[4, 8], &(1..3)).is_ok_and(|(start, shape)| start == 8 && shape == [2, 8]));
        assert!(row_range(&[4, 8], &(3..5)).is_err());
    }
}

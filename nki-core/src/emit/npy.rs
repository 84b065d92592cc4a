//! NumPy `.npy` files (format version 1.0) of the emitter's host tensors: floating-point
//! dtypes as float32 values (exact for every dtype nki-rs holds; the driver casts them to the
//! kernel's dtype), integer and bool dtypes as int64.

use crate::dtype::DType;

/// The `.npy` bytes of a row-major tensor of `dims` holding `values` of `dtype`.
pub(crate) fn encode(dims: &[usize], dtype: DType, values: &[f32]) -> Vec<u8> {
    let float = !(dtype.is_int() || dtype == DType::Bool);
    let descr = if float { "<f4" } else { "<i8" };
    let shape = super::python::tuple(dims);
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + header length (2) + header, padded to 64 bytes with the '\n'.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + values.len() * 8);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in values {
        if float {
            out.extend_from_slice(&v.to_le_bytes());
        } else {
            out.extend_from_slice(&(v as i64).to_le_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_padded_to_64_bytes_and_data_follows() {
        let b = encode(&[2, 3], DType::F32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(header.ends_with('\n'));
        assert_eq!(b.len(), 10 + hlen + 6 * 4);
        assert_eq!(&b[10 + hlen..10 + hlen + 4], &1.0f32.to_le_bytes());
        let ints = encode(&[2], DType::I32, &[7.0, -1.0]);
        let h = u16::from_le_bytes([ints[8], ints[9]]) as usize;
        assert_eq!(&ints[10 + h..10 + h + 8], &7i64.to_le_bytes());
    }
}

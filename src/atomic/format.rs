//! The value's bytes: an 8-byte big-endian two's-complement integer.
//!
//! This is what Curator's `DistributedAtomicLong` writes (`ByteBuffer.putLong`) and reads, so a
//! Java service can share one value with this crate.

use super::error::AtomicError;

/// Size of a stored value in bytes.
pub const LONG_LEN: usize = 8;

/// The bytes stored for `value` (big-endian, as Curator stores it).
pub fn encode_long(value: i64) -> [u8; LONG_LEN] {
    value.to_be_bytes()
}

/// The value stored in `data`, read from the node at `path` (named in the error). No data is 0,
/// as Curator reads a node created empty.
///
/// Anything but 0 or 8 bytes is [`AtomicError::NotALong`]. Curator is laxer with longer data
/// (it reads the first 8 bytes); here a node that is not exactly a value is reported, never
/// guessed at.
pub fn decode_long(path: &str, data: &[u8]) -> Result<i64, AtomicError> {
    if data.is_empty() {
        return Ok(0);
    }
    <[u8; LONG_LEN]>::try_from(data)
        .map(i64::from_be_bytes)
        .map_err(|_| AtomicError::NotALong { path: path.to_owned(), len: data.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_big_endian_twos_complement() {
        assert_eq!(encode_long(1), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(encode_long(-1), [0xff; 8]);
        assert_eq!(encode_long(0x0102_0304_0506_0708), [1, 2, 3, 4, 5, 6, 7, 8]);
        for value in [0, 1, -1, 300, i64::MAX, i64::MIN] {
            assert_eq!(decode_long("/a", &encode_long(value)), Ok(value));
        }
        assert_eq!(decode_long("/a", b""), Ok(0), "an empty node is 0, as Curator reads it");
    }

    #[test]
    fn anything_but_eight_bytes_or_none_is_not_a_long() {
        for data in [&b"\x00\x00\x00\x01"[..], b"\x00\x00\x00\x00\x00\x00\x00\x00\x01"] {
            assert_eq!(decode_long("/a", data), Err(AtomicError::NotALong { path: "/a".into(), len: data.len() }));
        }
    }
}

/// Values another process wrote, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_bytes_are_a_value_or_a_typed_error_naming_the_node(data in prop::collection::vec(any::<u8>(), 0..20)) {
            match decode_long("/a", &data) {
                Ok(value) => {
                    let encoded = encode_long(value).to_vec();
                    prop_assert!(data.is_empty() && value == 0 || encoded == data);
                }
                Err(e) => prop_assert_eq!(e, AtomicError::NotALong { path: "/a".into(), len: data.len() }),
            }
        }
    }
}

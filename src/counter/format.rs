//! The count's bytes: a 4-byte big-endian two's-complement integer.
//!
//! This is what Curator's `SharedCount` writes (`ByteBuffer.putInt`) and what kazoo's
//! `Counter(support_curator=True)` reads and writes (`struct.pack(">i", value)`), so a Java or
//! Python service can share one counter with this crate.

use super::error::CounterError;

/// Size of a stored count in bytes.
pub const COUNT_LEN: usize = 4;

/// The bytes stored for `value` (big-endian, as Curator and kazoo store it).
pub fn encode_count(value: i32) -> [u8; COUNT_LEN] {
    value.to_be_bytes()
}

/// The count stored in `data`, read from the node at `path` (named in the error).
///
/// Anything but exactly 4 bytes is [`CounterError::NotACount`]. Curator is laxer: it reads the
/// first 4 bytes of longer data and ignores the rest (and throws on shorter data); here a node
/// that is not exactly a count is reported, never guessed at.
pub fn decode_count(path: &str, data: &[u8]) -> Result<i32, CounterError> {
    <[u8; COUNT_LEN]>::try_from(data)
        .map(i32::from_be_bytes)
        .map_err(|_| CounterError::NotACount { path: path.to_owned(), len: data.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_big_endian_twos_complement() {
        assert_eq!(encode_count(0), [0, 0, 0, 0]);
        assert_eq!(encode_count(1), [0, 0, 0, 1]);
        assert_eq!(encode_count(2000), [0, 0, 0x07, 0xd0]);
        assert_eq!(encode_count(-1), [0xff, 0xff, 0xff, 0xff]);
        assert_eq!(encode_count(i32::MIN), [0x80, 0, 0, 0]);
        for value in [0, 1, -1, 2000, -7, i32::MAX, i32::MIN] {
            assert_eq!(decode_count("/c", &encode_count(value)), Ok(value));
        }
    }

    #[test]
    fn anything_but_four_bytes_is_not_a_count() {
        for data in [&b""[..], b"\x00\x00\x01", b"\x00\x00\x00\x01\x00"] {
            assert_eq!(decode_count("/c", data), Err(CounterError::NotACount { path: "/c".into(), len: data.len() }));
        }
    }
}

/// Counts another process wrote, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_bytes_are_a_count_or_a_typed_error_naming_the_node(data in prop::collection::vec(any::<u8>(), 0..12)) {
            match decode_count("/c", &data) {
                Ok(count) => prop_assert_eq!(encode_count(count).to_vec(), data),
                Err(e) => prop_assert_eq!(e, CounterError::NotACount { path: "/c".into(), len: data.len() }),
            }
        }
    }
}

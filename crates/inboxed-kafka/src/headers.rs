//! A record's headers as bytes.
//!
//! rdkafka reads a header's name with `to_str().unwrap()`: one name that is not UTF-8 (Kafka
//! takes any bytes, and any producer outside Rust can send them) panicked the consumer's source,
//! and the restarted consumer received the same record first again, so one record stopped its
//! partition for good. The names are read here through librdkafka's own accessor instead, as
//! bytes; a name that is not UTF-8 then names no key and is simply another header.

use std::ffi::{CStr, c_char, c_void};

use rdkafka::bindings::{rd_kafka_header_get_all, rd_kafka_message_headers, rd_kafka_resp_err_t};
use rdkafka::message::BorrowedMessage;

/// The headers of `record`, names and values as bytes, in the order the producer gave them
/// (a null value as empty). librdkafka hands names out NUL-terminated, so a name holding a NUL
/// byte is read up to it.
#[allow(unsafe_code)]
pub(crate) fn raw_headers(record: &BorrowedMessage<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut headers = std::ptr::null_mut();
    // SAFETY: `record.ptr()` is the message librdkafka keeps alive as long as `record`; the call
    // only reads it and points `headers` at the message's own header list, freed with it.
    let found = unsafe { rd_kafka_message_headers(record.ptr(), &raw mut headers) };
    if found != rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || headers.is_null() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for idx in 0.. {
        let (mut name, mut value, mut size): (*const c_char, *const c_void, usize) =
            (std::ptr::null(), std::ptr::null(), 0);
        // SAFETY: `headers` lives as long as `record` (above); for an index in range the call
        // points `name` at a NUL-terminated string and `value` at `size` bytes (or null), both
        // inside the header list, and fails (writing nothing) past its end.
        let got = unsafe {
            rd_kafka_header_get_all(headers, idx, &raw mut name, &raw mut value, &raw mut size)
        };
        if got != rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            break;
        }
        // SAFETY: as the call above promises: a NUL-terminated name, `size` bytes of value.
        let (name, value) = unsafe {
            let name = CStr::from_ptr(name).to_bytes().to_vec();
            let value = if value.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(value.cast::<u8>(), size).to_vec()
            };
            (name, value)
        };
        out.push((name, value));
    }
    out
}

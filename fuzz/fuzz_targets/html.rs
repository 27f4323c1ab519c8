#![no_main]
//! HTML extraction never panics on any input.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let html = String::from_utf8_lossy(data);
    let _ = rlm_corpus::html::html_to_text(&html);
});

pub fn parse_rate(_text: &str) -> Result<u64, String> {
    unimplemented!()
}
pub fn parse_size(_text: &str) -> Result<u64, String> {
    unimplemented!()
}
pub fn parse_time(_text: &str) -> Result<u64, String> {
    unimplemented!()
}
pub fn format_rate(_bps: f64) -> String {
    unimplemented!()
}
pub fn format_size(_bytes: u64) -> String {
    unimplemented!()
}
pub fn format_time(_ns: u64) -> String {
    unimplemented!()
}

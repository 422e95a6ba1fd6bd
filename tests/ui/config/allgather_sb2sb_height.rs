/// Rejected at compile time: 256 rows do not fit the SBUF partitions of one
/// untiled gather.
fn main() {
    let call = nkilib::allgather_sb2sb_config!(rows = 256);
    let _ = call;
}

//! `nki list`.

/// Prints each registered kernel with its Python module and Rust source file.
pub fn run() {
    for k in nki::registry() {
        outln!("{:<28} {:<24} {}", k.name, format!("{}.py", k.python_module()), k.source_file());
    }
}

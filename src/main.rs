//! Thin binary: hand argv to the library and exit with what it returns.

fn main() {
    let code = hamaster::main_with_args(std::env::args().collect());
    std::process::exit(code);
}

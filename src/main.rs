//! Thin binary: hand argv to the library and exit with what it returns.

fn main() {
    // std::env::args() panics on an argument that is not UTF-8: such bytes become U+FFFD, and
    // the action or value they spell is refused with a reason like any other unknown one.
    let args = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let exit = hamaster::main_with_args(args);
    std::process::exit(exit.code());
}

//! `sandboxctl`: see `sandboxctl --help`.

fn main() {
    std::process::exit(sandboxd::ctl::main_impl(std::env::args_os()));
}

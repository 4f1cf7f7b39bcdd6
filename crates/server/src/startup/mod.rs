//! Starting the server: the command line, running under a service manager (`-u`,
//! `-d`, `-P`), the password files, and the acceptor thread over the listeners.

pub mod auth;
pub mod listen;
pub mod service;
pub mod settings;

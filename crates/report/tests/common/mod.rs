pub mod synthetic;

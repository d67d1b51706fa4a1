//! # nicsched simulator

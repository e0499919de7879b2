"""The reference studies as data: each one declared once, run, resumed, followed and collated by one command."""

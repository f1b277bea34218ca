"""pimem's bundled plugins: every concrete behaviour, each registered through the ``pimem`` entry-point group."""

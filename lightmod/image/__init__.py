"""Image functions and iterators (``mx.image`` / ``mx.img``)."""

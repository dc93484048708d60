"""lightmod's own version.

The series number 1.91 says "tracks the MXNet 1.9.1 API". It is chosen so that user code that
compares ``mx.__version__`` with MXNet versions *as strings* (``mx.__version__ >= "1.3.0"``, as
the DetModule seed does) takes the modern 1.x branch, and code testing ``< "2"`` still sees a
1.x API: "1.91.0" sorts after every "1.x" MXNet release string and before "2".
"""
__version__ = "1.91.0"

import sys

from torchdoctor.stub import server

if sys.argv[1:] != ["serve"]:
    sys.exit("usage: python -m torchdoctor serve")
server.start_io()

# Plain `make` without the -dev packages names the missing Debian packages and how to install
# them, instead of failing on a header. A pkg-config that finds nothing stands in for a fresh
# machine; make stops while reading the Makefile, before it builds anything. MAKEFLAGS is
# emptied so that a `make -j2 test` above does not add its jobserver warning.
source "$TOP/tests/cli/lib.bash"
mkdir bin && printf '#!/bin/sh\nexit 1\n' > bin/pkg-config && chmod +x bin/pkg-config
rc=0
PATH="$PWD/bin:$PATH" MAKEFLAGS= MFLAGS= make -s -C "$TOP" BUILD="$PWD/build" all > out.txt 2> err.txt || rc=$?
echo "exit $rc"
sed 's/^Makefile:[0-9]*: \*\*\* //' err.txt
[ ! -e build ] && echo "nothing built"

"""Install carried wheels into one directory for PYTHONPATH, data files included (no network needed).

`pip install --target` drops a wheel's data files (`NAME.data/data/...`), and EasyBuild looks for its
rpath_args.py and other scripts in `easybuild/scripts` beside its package: they are copied there from each
wheel.  Usage: python3 install_carried.py WHEEL_DIR TARGET
"""

import glob
import os
import subprocess
import sys
import zipfile


def main():
    wheels, target = sys.argv[1], sys.argv[2]
    found = sorted(glob.glob(os.path.join(wheels, '*.whl')))
    subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-index', '--no-deps', '--no-compile',
                    '--no-cache-dir', '--target', target, *found], check=True)
    for wheel in found:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                parts = member.split('/')
                if len(parts) > 3 and parts[0].endswith('.data') and parts[1] == 'data' and \
                        os.path.isdir(os.path.join(target, parts[2])) and not member.endswith('/'):
                    destination = os.path.join(target, *parts[2:])
                    os.makedirs(os.path.dirname(destination), exist_ok=True)
                    with archive.open(member) as source, open(destination, 'wb') as out:
                        out.write(source.read())
                    os.chmod(destination, 0o755)
    print(f'install_carried: {len(found)} wheels in {target}')


if __name__ == '__main__':
    main()

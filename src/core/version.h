#ifndef SPK_VERSION_H
#define SPK_VERSION_H

#define SPK_VERSION "0.1.0"

#endif

"""The entries the parser must find in each seed document (../shared/seeds): (title, first line,
last line), a table written by reading the documents (tests/test_parse.py checks against it)."""

SEED_000 = [
    ("进行HCCL分布式训练出错：Init plugin so failed, ret = 1343225860？", 5, 7),
    ("MindSpore执行GPU分布式训练报错如下，如何解决", 11, 23),
    (
        "GPU分布式训练场景下，若错误设置环境变量CUDA_VISIBLE_DEVICES的个数小于执行的进程数时，"
        "可能导致进程阻塞问题。",
        27,
        44,
    ),
    ("GPU分布式训练场景下，若某进程异常退出，可能导致其余进程阻塞问题。", 48, 58),
    ("在执行单机单卡的脚本时，调用communication.management.init方法可能会报错导致执行失败。", 62, 68),
]


SEED_001 = [
    (
        "What should I do if the error message Init plugin so failed, ret = 1343225860 is displayed "
        "during the HCCL distributed training?",
        5,
        7,
    ),
    (
        "In the GPU distributed training scenario, what should I do if the number of environment "
        "variables CUDA_VISIBLE_DEVICES set incorrectly is less than the number of processes executed, "
        "the process blocking problem may occur?",
        11,
        28,
    ),
    (
        "What can we do when in the GPU distributed training scenario, if a process exits abnormally, "
        "it may cause other processes to block?",
        32,
        42,
    ),
    (
        "When executing a GPU stand-alone single-card script, when the process is started without "
        "mpirun, calling the mindspore.communication.init method may report an error, resulting in "
        "execution failure, how to deal with it?",
        46,
        52,
    ),
    (
        "What can we do when performing multi-machine multi-card training via OpenMPI, the prompt "
        "fails due to MPI_Allgather?",
        56,
        77,
    ),
    (
        "What can we do when performing distributed training via OpenMPI, stand-alone multi-card "
        "training is normal, but during the multi-machine multi-card training, some machines prompt "
        "the GPU device id setting to fail?",
        81,
        92,
    ),
    (
        "What can we do when performing multi-machine multi-card training via OpenMPI, the NCCL error "
        "message displays that the network is not working?",
        96,
        108,
    ),
    (
        "What can we do when after selecting RDMA NIC with a specific name (set via NCCL_SOCKET_IFNAME) "
        "for communication for multiple machines and multiple cards, the training still reports an error?",
        112,
        126,
    ),
    (
        "What can we do when single-machine multi-card training is successful, but after expanding the "
        "script to multi-machine multi-card, other hosts prompt all kinds of errors?",
        130,
        144,
    ),
    (
        "Performing the distributed training via OpenMPI on Ascend, got HcclCommInitRootInfo error "
        "message. How can we deal it?",
        148,
        155,
    ),
    (
        "When executing a distributed network under auto_parallel, an error is reported that the tensor "
        "cannot be split by the strategy. How can we solve it?",
        159,
        165,
    ),
    (
        "What should I do if a process exits abnormally during the execution of multi-card training on a "
        "Linux environment and there is a shared memory residue through the ipcs command?",
        169,
        171,
    ),
    (
        "I try to train a small network on Ascend platform but during initializing distributed module, "
        "device memory not enough exception is still thrown. How should I solve this issue?",
        175,
        177,
    ),
    (
        "When using msrun to start a distributed framework, if I pass in the hostname as the master_addr "
        "but report an error that DNS resolution failed, how can I fix it?",
        181,
        191,
    ),
    (
        "When starting distributed framework using dynamic cluster or msrun in multi-machine scenario, "
        "an error is reported that device id is out of range. How can we solve it?",
        195,
        210,
    ),
    (
        "How to resolve Unique ID retrieval timeout failures when using dynamic cluster or msrun to "
        "launch distributed tasks with HCCL backend in multi-cards scenarios?",
        214,
        249,
    ),
]


SEED_002 = [
    ("环境验证和常见问题", 1, 3),
    ("1. 单机环境验证", 5, 7),
    ("GPU验证", 9, 68),
    ("PaddlePaddle 安装验证", 70, 98),
    ("2. 分布式环境验证", 100, 179),
    ("实际分布式训练任务验证", 181, 398),
    ("3.1 网络问题排查", 402, 404),
    ("获取节点IP", 406, 415),
    ("确认节点间是否能通过ping连接", 418, 436),
    ("确认节点间是否能通过HTTP/TCP连接", 438, 468),
    ("确认NCCL是否运行正常", 470, 503),
    ("3.2 多Python环境问题", 505, 538),
    ("3.3 自动获取 IP 错误（多网卡环境问题）", 540, 583),
    ("3.4 机器端口有限制，需要使用固定端口", 585, 608),
    ("3.5 常用的通信问题排查", 610, 612),
    ("NCCL error(5)", 614, 621),
    ("NCCL error(2)", 623, 629),
]


SEED_003 = [("多机多卡训练", 1, 120)]


SEED_004 = [
    ("构建集群", 3, 5),
    ("域名映射", 7, 44),
    ("免密登录", 46, 109),
    ("CUDA版本一致（Linux系统可以同时安装多个CUDA版本），安装时都需要和系统版本适配。", 116, 157),
    ("PyTorch版本一致", 159, 159),
    ("NCCL（ NVIDIA Collective Communication Library）版本一致", 161, 168),
    ("启动命令", 170, 172),
    ("问题避免", 174, 183),
    ("NCCL导致的报错，报错信息如下", 187, 219),
    ("训练速度比较慢，远慢于单机多卡，网线直通可能会快点，路由器带宽限制了速度。", 223, 223),
]

"""Shared lexicon of the synthetic typed-decision data: concepts, cue terms, scales and facts.

Every split (train, calib, heldout) draws from this one lexicon; only the sentence templates in
`laya_opt.suites.synthetic.templates` differ between training and held-out data. Each label is learnable by lexical
matching: a concept's cue words appear both in the state and in the option text of that concept.

Tables are written as `id: lang=label|cue|cue; lang=...` lines and parsed once at import.
"""
from __future__ import annotations

from dataclasses import dataclass

LANGUAGES = ("en", "de", "fr", "es", "ru", "zh", "ja", "hi")
CJK_LANGUAGES = frozenset({"zh", "ja"})


@dataclass(frozen=True)
class Concept:
    """One option concept (a department, a product) in one language: label first, then cue synonyms."""

    id: str
    lang: str
    label: str
    cues: tuple[str, ...]  # label + synonyms; the state mentions exactly one of them

    @property
    def synonyms(self) -> tuple[str, ...]:
        return self.cues[1:]


@dataclass(frozen=True)
class Fact:
    """A yes/no fact: the statement asked about, its negation, and first-person state sentences."""

    id: str
    lang: str
    statement: str      # e.g. "The customer asks for a refund."
    negation: str       # e.g. "The customer does not ask for a refund."
    holds: str          # state sentence when the fact is true
    fails: str          # state sentence when the fact is false (explicit negation)


def _parse_concepts(table: str) -> dict[str, dict[str, Concept]]:
    out: dict[str, dict[str, Concept]] = {}
    for lineno, line in enumerate(table.strip().splitlines(), 1):
        cid, _, rest = line.partition(":")
        cid = cid.strip()
        per_lang: dict[str, Concept] = {}
        for chunk in rest.split(";"):
            lang, _, words = chunk.strip().partition("=")
            cues = tuple(w.strip() for w in words.split("|") if w.strip())
            if lang not in LANGUAGES or len(cues) < 2:
                raise ValueError(f"lexicon table line {lineno} ({cid}): bad entry {chunk!r}")
            per_lang[lang] = Concept(cid, lang, cues[0], cues)
        if set(per_lang) != set(LANGUAGES):
            raise ValueError(f"lexicon table line {lineno} ({cid}): languages {sorted(per_lang)}")
        out[cid] = per_lang
    return out


def _parse_per_lang(table: str, width: int) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for lineno, line in enumerate(table.strip().splitlines(), 1):
        lang, _, rest = line.partition("=")
        items = tuple(x.strip() for x in rest.split("|"))
        if lang.strip() not in LANGUAGES or len(items) != width:
            raise ValueError(f"lexicon per-language table line {lineno}: expected {width} items: {line!r}")
        out[lang.strip()] = items
    if set(out) != set(LANGUAGES):
        raise ValueError(f"lexicon per-language table: languages {sorted(out)}")
    return out


# --- Departments (choice, up to 20 options): label | synonym | synonym ------------------------------
DEPARTMENTS = _parse_concepts("""
billing: en=billing|invoice|payment; de=Buchhaltung|Rechnung|Zahlung; fr=facturation|facture|paiement; es=facturación|factura|pago; ru=бухгалтерия|счёт|оплата; zh=账务|发票|付款; ja=経理|請求書|支払い; hi=बिलिंग|चालान|भुगतान
technical: en=technical|bug|crash; de=Technik|Fehler|Absturz; fr=technique|bogue|plantage; es=técnico|fallo|cuelgue; ru=техподдержка|ошибка|сбой; zh=技术|故障|崩溃; ja=技術|不具合|クラッシュ; hi=तकनीकी|बग|क्रैश
shipping: en=shipping|delivery|courier; de=Versand|Lieferung|Kurier; fr=expédition|livraison|transporteur; es=envíos|entrega|mensajero; ru=доставка|курьер|посылка; zh=物流|快递|配送; ja=配送|宅配便|運送業者; hi=शिपिंग|डिलीवरी|कूरियर
returns: en=returns|exchange|wrong size; de=Retouren|Umtausch|falsche Größe; fr=retours|échange|mauvaise taille; es=devoluciones|cambio|talla equivocada; ru=возвраты|обмен|не тот размер; zh=退货|换货|尺码不对; ja=返品|交換|サイズ違い; hi=वापसी|एक्सचेंज|गलत साइज़
account: en=account|password|login; de=Konto|Passwort|Anmeldung; fr=compte|mot de passe|connexion; es=cuenta|contraseña|inicio de sesión; ru=аккаунт|пароль|вход; zh=账户|密码|登录; ja=アカウント|パスワード|ログイン; hi=खाता|पासवर्ड|लॉगिन
sales: en=sales|quote|discount; de=Vertrieb|Angebot|Rabatt; fr=ventes|devis|remise; es=ventas|presupuesto|descuento; ru=продажи|смета|скидка; zh=销售|报价|折扣; ja=営業|見積もり|割引; hi=बिक्री|कोटेशन|छूट
legal: en=legal|contract|lawyer; de=Recht|Vertrag|Anwalt; fr=juridique|contrat|avocat; es=legal|contrato|abogado; ru=юридический отдел|договор|юрист; zh=法务|合同|律师; ja=法務|契約書|弁護士; hi=कानूनी|अनुबंध|वकील
privacy: en=privacy|personal data|GDPR; de=Datenschutz|personenbezogene Daten|DSGVO; fr=confidentialité|données personnelles|RGPD; es=privacidad|datos personales|RGPD; ru=конфиденциальность|персональные данные|GDPR; zh=隐私|个人数据|数据删除; ja=プライバシー|個人情報|データ削除; hi=गोपनीयता|निजी डेटा|GDPR
security: en=security|phishing|hacked; de=Sicherheit|Phishing|gehackt; fr=sécurité|hameçonnage|piraté; es=seguridad|phishing|hackeado; ru=безопасность|фишинг|взлом; zh=安全|钓鱼|盗号; ja=セキュリティ|フィッシング|乗っ取り; hi=सुरक्षा|फ़िशिंग|हैक
hr: en=HR|salary|vacation; de=Personal|Gehalt|Urlaub; fr=RH|salaire|congés; es=recursos humanos|salario|vacaciones; ru=отдел кадров|зарплата|отпуск; zh=人事|工资|休假; ja=人事|給与|休暇; hi=मानव संसाधन|वेतन|छुट्टी
marketing: en=marketing|newsletter|advertising; de=Marketing|Newsletter|Werbung; fr=marketing|newsletter|publicité; es=marketing|boletín|publicidad; ru=маркетинг|рассылка|реклама; zh=市场营销|新闻通讯|广告; ja=マーケティング|ニュースレター|広告; hi=मार्केटिंग|न्यूज़लेटर|विज्ञापन
partnerships: en=partnerships|reseller|affiliate; de=Partnerschaften|Wiederverkäufer|Affiliate; fr=partenariats|revendeur|affiliation; es=alianzas|revendedor|afiliados; ru=партнёрства|реселлер|аффилиат; zh=合作伙伴|经销商|联盟计划; ja=パートナー|販売代理店|アフィリエイト; hi=साझेदारी|पुनर्विक्रेता|एफिलिएट
facilities: en=facilities|heating|elevator; de=Gebäudemanagement|Heizung|Aufzug; fr=services généraux|chauffage|ascenseur; es=instalaciones|calefacción|ascensor; ru=хозяйственный отдел|отопление|лифт; zh=行政后勤|暖气|电梯; ja=総務|暖房|エレベーター; hi=सुविधाएँ|हीटिंग|लिफ़्ट
procurement: en=procurement|supplier|vendor; de=Einkauf|Beschaffung|Ausschreibung; fr=achats|fournisseur|appel d'offres; es=compras|proveedor|licitación; ru=закупки|поставщик|тендер; zh=采购|供应商|招标; ja=購買|仕入先|入札; hi=खरीद|आपूर्तिकर्ता|निविदा
training: en=training|course|workshop; de=Schulung|Kurs|Workshop; fr=formation|cours|atelier; es=formación|curso|taller; ru=обучение|курс|семинар; zh=培训|课程|研讨会; ja=研修|講座|ワークショップ; hi=प्रशिक्षण|कोर्स|कार्यशाला
feedback: en=feedback|suggestion|idea; de=Feedback|Vorschlag|Idee; fr=avis|suggestion|idée; es=comentarios|sugerencia|idea; ru=отзывы|предложение|идея; zh=反馈|建议|想法; ja=フィードバック|提案|アイデア; hi=प्रतिक्रिया|सुझाव|विचार
accessibility: en=accessibility|screen reader|subtitles; de=Barrierefreiheit|Screenreader|Untertitel; fr=accessibilité|synthèse vocale|sous-titres; es=accesibilidad|audiodescripción|subtítulos; ru=доступность|экранный диктор|субтитры; zh=无障碍|读屏软件|字幕; ja=アクセシビリティ|スクリーンリーダー|字幕; hi=सुलभता|स्क्रीन रीडर|सबटाइटल
warranty: en=warranty|guarantee|repair; de=Garantie|Gewährleistung|Reparatur; fr=garantie|réparation|SAV; es=garantía|reparación|avería; ru=гарантия|ремонт|гарантийный талон; zh=保修|维修|质保; ja=保証|修理|保証書; hi=वारंटी|मरम्मत|गारंटी
subscriptions: en=subscriptions|renewal|monthly plan; de=Abonnements|Verlängerung|Monatsabo; fr=abonnements|renouvellement|forfait; es=suscripciones|renovación|plan mensual; ru=подписки|продление|тариф; zh=订阅|续费|套餐; ja=サブスクリプション|自動更新|月額プラン; hi=सदस्यता|नवीनीकरण|मासिक प्लान
press: en=press|journalist|interview; de=Presse|Journalist|Interview; fr=presse|journaliste|interview; es=prensa|periodista|entrevista; ru=пресс-служба|журналист|интервью; zh=媒体关系|记者|采访; ja=広報|記者|取材; hi=प्रेस|पत्रकार|साक्षात्कार
""")

# --- Products (choice, up to 12 options): label | synonym ---------------------------------------------
PRODUCTS = _parse_concepts("""
laptop: en=laptop|notebook; de=Laptop|Notebook; fr=ordinateur portable|laptop; es=portátil|laptop; ru=ноутбук|лэптоп; zh=笔记本电脑|手提电脑; ja=ノートパソコン|ラップトップ; hi=लैपटॉप|नोटबुक
phone: en=mobile|smartphone; de=Handy|Smartphone; fr=téléphone|smartphone; es=móvil|teléfono; ru=телефон|смартфон; zh=手机|智能机; ja=スマホ|携帯電話; hi=मोबाइल|स्मार्टफ़ोन
printer: en=printer|inkjet; de=Drucker|Tintenstrahler; fr=imprimante|jet d'encre; es=impresora|tóner; ru=принтер|картридж; zh=打印机|墨盒; ja=プリンター|インク; hi=प्रिंटर|इंकजेट
router: en=router|Wi-Fi; de=Router|WLAN; fr=routeur|Wi-Fi; es=router|wifi; ru=роутер|Wi-Fi; zh=路由器|无线网络; ja=ルーター|無線LAN; hi=राउटर|वाई-फ़ाई
monitor: en=monitor|display; de=Monitor|Bildschirm; fr=moniteur|affichage; es=monitor|pantalla; ru=монитор|дисплей; zh=显示器|屏幕; ja=モニター|ディスプレイ; hi=मॉनिटर|डिस्प्ले
keyboard: en=keyboard|keys; de=Tastatur|Tasten; fr=clavier|touches; es=teclado|teclas; ru=клавиатура|клавиши; zh=键盘|按键; ja=キーボード|打鍵; hi=कीबोर्ड|कुंजी
headphones: en=headphones|earbuds; de=Kopfhörer|Ohrhörer; fr=casque|écouteurs; es=auriculares|cascos; ru=наушники|гарнитура; zh=耳机|耳麦; ja=ヘッドホン|イヤホン; hi=हेडफ़ोन|ईयरबड्स
camera: en=camera|lens; de=Kamera|Objektiv; fr=appareil photo|objectif; es=cámara|objetivo; ru=камера|объектив; zh=相机|镜头; ja=カメラ|レンズ; hi=कैमरा|लेंस
tablet: en=tablet|e-reader; de=Tablet|E-Reader; fr=tablette|liseuse; es=tableta|lector electrónico; ru=планшет|электронная книга; zh=平板电脑|电子阅读器; ja=タブレット|電子書籍リーダー; hi=टैबलेट|ई-रीडर
smartwatch: en=smartwatch|fitness tracker; de=Smartwatch|Fitnessarmband; fr=montre connectée|bracelet connecté; es=reloj inteligente|pulsera de actividad; ru=умные часы|фитнес-браслет; zh=智能手表|手环; ja=スマートウォッチ|活動量計; hi=स्मार्टवॉच|फ़िटनेस बैंड
speaker: en=speaker|soundbar; de=Lautsprecher|Soundbar; fr=enceinte|barre de son; es=altavoz|barra de sonido; ru=колонка|саундбар; zh=音箱|回音壁; ja=スピーカー|サウンドバー; hi=स्पीकर|साउंडबार
charger: en=charger|power adapter; de=Ladegerät|Netzteil; fr=chargeur|adaptateur secteur; es=cargador|adaptador de corriente; ru=зарядка|блок питания; zh=充电器|电源适配器; ja=充電器|電源アダプター; hi=चार्जर|पावर एडाप्टर
""")

# --- Ordered scales (score): 7 terms, level 0 = lowest --------------------------------------------------
URGENCY = _parse_per_lang("""
en=trivial|minor|moderate|significant|serious|urgent|critical
de=belanglos|geringfügig|mäßig|erheblich|ernst|dringend|kritisch
fr=anodin|mineur|modéré|élevé|grave|urgent|critique
es=trivial|menor|moderado|considerable|grave|urgente|crítico
ru=пустяковый|незначительный|умеренный|существенный|серьёзный|срочный|критический
zh=无关紧要|轻微|中等|较高|严重|紧急|危急
ja=些細|軽微|中程度|やや高い|深刻|緊急|致命的
hi=मामूली|न्यून|सामान्य|ऊँचा|गंभीर|तत्काल|आपातकालीन
""", 7)

MOOD = _parse_per_lang("""
en=furious|annoyed|disappointed|indifferent|satisfied|pleased|thrilled
de=wütend|verärgert|enttäuscht|gleichgültig|zufrieden|erfreut|begeistert
fr=furieux|agacé|déçu|indifférent|satisfait|ravi|enthousiaste
es=furioso|molesto|decepcionado|indiferente|satisfecho|contento|encantado
ru=в ярости|раздражён|разочарован|равнодушен|доволен|рад|в восторге
zh=愤怒|恼火|失望|无所谓|满意|高兴|兴奋不已
ja=激怒|いらいら|がっかり|無関心|満足|うれしい|大喜び
hi=क्रोधित|नाराज़|निराश|उदासीन|संतुष्ट|प्रसन्न|रोमांचित
""", 7)

# Log levels are language-independent; filler log lines use INFO, which is not on the scale.
LOG_LEVELS = ("TRACE", "DEBUG", "NOTICE", "WARNING", "ERROR", "CRITICAL", "FATAL")

# Rating level description ("{n} of {m}"), one per language; shared by all splits.
RATING_LEVEL = {
    "en": "{n} out of {m}", "de": "{n} von {m}", "fr": "{n} sur {m}", "es": "{n} de {m}",
    "ru": "{n} из {m}", "zh": "{n}分（满分{m}）", "ja": "{n}点（{m}点満点）", "hi": "{m} में से {n}",
}

# Choice option descriptions: "{words}" is the language's list of cue words.
DESCRIPTION_FRAMES = {
    "en": ("requests about {words}",), "de": ("Anfragen zu {words}",), "fr": ("demandes sur {words}",),
    "es": ("consultas sobre {words}",), "ru": ("вопросы: {words}",), "zh": ("有关{words}的请求",),
    "ja": ("{words}に関する依頼",), "hi": ("{words} से जुड़े अनुरोध",),
}
LIST_JOINER = {lang: ("、" if lang in CJK_LANGUAGES else ", ") for lang in LANGUAGES}

# Generic alert text for a log line that carries no department cue.
GENERIC_ALERT = {
    "en": "Anomaly detected in the service.", "de": "Anomalie im Dienst erkannt.",
    "fr": "Anomalie détectée dans le service.", "es": "Anomalía detectada en el servicio.",
    "ru": "Обнаружена аномалия в сервисе.", "zh": "服务中检测到异常。", "ja": "サービスで異常を検知しました。",
    "hi": "सेवा में विसंगति पाई गई।",
}

NAMES = {
    "en": ("Alex Morgan", "Sam Taylor", "Jordan Lee"), "de": ("Anna Schmidt", "Jonas Weber", "Lena Fischer"),
    "fr": ("Camille Martin", "Louis Bernard", "Chloé Dubois"), "es": ("Lucía García", "Mateo López", "Sofía Martínez"),
    "ru": ("Анна Иванова", "Дмитрий Смирнов", "Ольга Кузнецова"), "zh": ("王芳", "李伟", "张敏"),
    "ja": ("佐藤 花子", "鈴木 一郎", "高橋 美咲"), "hi": ("राहुल शर्मा", "प्रिया वर्मा", "अमित कुमार"),
}

# --- Facts (noul): statement | negated statement | state sentence (holds) | state sentence (fails) -------
_FACT_TABLE = {
    "refund": """
en=The customer asks for a refund.|The customer does not ask for a refund.|I am asking for a refund.|I am not asking for a refund.
de=Der Kunde verlangt eine Rückerstattung.|Der Kunde verlangt keine Rückerstattung.|Ich möchte eine Rückerstattung.|Ich möchte keine Rückerstattung.
fr=Le client demande un remboursement.|Le client ne demande pas de remboursement.|Je demande un remboursement.|Je ne demande pas de remboursement.
es=El cliente pide un reembolso.|El cliente no pide un reembolso.|Solicito un reembolso.|No solicito ningún reembolso.
ru=Клиент просит вернуть деньги.|Клиент не просит вернуть деньги.|Прошу вернуть мне деньги.|Я не прошу вернуть деньги.
zh=客户要求退款。|客户没有要求退款。|我要求退款。|我不要求退款。
ja=お客様は返金を求めている。|お客様は返金を求めていない。|返金をお願いします。|返金は求めていません。
hi=ग्राहक रिफंड माँग रहा है।|ग्राहक रिफंड नहीं माँग रहा है।|मुझे रिफंड चाहिए।|मुझे रिफंड नहीं चाहिए।
""",
    "screenshot": """
en=The customer attached a screenshot.|The customer did not attach a screenshot.|I have attached a screenshot.|I did not attach a screenshot.
de=Der Kunde hat einen Screenshot angehängt.|Der Kunde hat keinen Screenshot angehängt.|Ich habe einen Screenshot angehängt.|Ich habe keinen Screenshot angehängt.
fr=Le client a joint une capture d'écran.|Le client n'a pas joint de capture d'écran.|J'ai joint une capture d'écran.|Je n'ai pas joint de capture d'écran.
es=El cliente adjuntó una captura.|El cliente no adjuntó ninguna captura.|Adjunto una captura.|No adjunto ninguna captura.
ru=Клиент приложил скриншот.|Клиент не приложил скриншот.|Я приложил скриншот.|Я не прикладывал скриншот.
zh=客户附上了截图。|客户没有附上截图。|我附上了截图。|我没有附截图。
ja=お客様はスクリーンショットを添付した。|お客様はスクリーンショットを添付していない。|スクリーンショットを添付しました。|スクリーンショットは添付していません。
hi=ग्राहक ने स्क्रीनशॉट लगाया है।|ग्राहक ने स्क्रीनशॉट नहीं लगाया है।|मैंने स्क्रीनशॉट लगाया है।|मैंने स्क्रीनशॉट नहीं लगाया।
""",
    "card_blocked": """
en=The customer's card is blocked.|The customer's card is not blocked.|My card is blocked.|My card is not blocked.
de=Die Karte des Kunden ist gesperrt.|Die Karte des Kunden ist nicht gesperrt.|Meine Karte ist gesperrt.|Meine Karte ist nicht gesperrt.
fr=La carte du client est bloquée.|La carte du client n'est pas bloquée.|Ma carte est bloquée.|Ma carte n'est pas bloquée.
es=La tarjeta del cliente está bloqueada.|La tarjeta del cliente no está bloqueada.|Mi tarjeta está bloqueada.|Mi tarjeta no está bloqueada.
ru=Карта клиента заблокирована.|Карта клиента не заблокирована.|Моя карта заблокирована.|Моя карта не заблокирована.
zh=客户的卡被冻结了。|客户的卡没有被冻结。|我的卡被冻结了。|我的卡没有被冻结。
ja=お客様のカードは停止されている。|お客様のカードは停止されていない。|カードが停止されています。|カードは停止されていません。
hi=ग्राहक का कार्ड ब्लॉक है।|ग्राहक का कार्ड ब्लॉक नहीं है।|मेरा कार्ड ब्लॉक हो गया है।|मेरा कार्ड ब्लॉक नहीं है।
""",
    "callback": """
en=The customer wants a call back.|The customer does not want a call back.|Please call me back.|Please do not call me back.
de=Der Kunde möchte einen Rückruf.|Der Kunde möchte keinen Rückruf.|Bitte rufen Sie mich zurück.|Bitte rufen Sie mich nicht zurück.
fr=Le client souhaite être rappelé.|Le client ne souhaite pas être rappelé.|Merci de me rappeler.|Merci de ne pas me rappeler.
es=El cliente quiere que lo llamen.|El cliente no quiere que lo llamen.|Por favor, llámenme.|Por favor, no me llamen.
ru=Клиент хочет, чтобы ему перезвонили.|Клиент не хочет, чтобы ему перезвонили.|Пожалуйста, перезвоните мне.|Пожалуйста, не перезванивайте мне.
zh=客户希望回电。|客户不希望回电。|请给我回电话。|请不要给我回电话。
ja=お客様は折り返しの連絡を希望している。|お客様は折り返しの連絡を希望していない。|折り返しご連絡ください。|折り返しの連絡は不要です。
hi=ग्राहक वापस कॉल चाहता है।|ग्राहक वापस कॉल नहीं चाहता है।|कृपया मुझे वापस कॉल करें।|कृपया मुझे वापस कॉल न करें।
""",
    "happened_before": """
en=The problem has happened before.|The problem has not happened before.|This has happened before.|This has never happened before.
de=Das Problem ist schon früher aufgetreten.|Das Problem ist noch nie aufgetreten.|Das ist schon früher passiert.|Das ist noch nie passiert.
fr=Le problème s'est déjà produit.|Le problème ne s'est jamais produit.|C'est déjà arrivé auparavant.|Ce n'est jamais arrivé auparavant.
es=El problema ya ha ocurrido antes.|El problema nunca había ocurrido.|Esto ya me pasó antes.|Esto nunca me había pasado.
ru=Проблема уже возникала раньше.|Проблема раньше не возникала.|Такое уже случалось раньше.|Такого раньше никогда не случалось.
zh=这个问题以前发生过。|这个问题以前没有发生过。|以前也发生过这种情况。|以前从没发生过这种情况。
ja=この問題は以前にも起きている。|この問題は以前には起きていない。|前にも同じことがありました。|前にはこんなことはありませんでした。
hi=यह समस्या पहले भी हुई है।|यह समस्या पहले कभी नहीं हुई।|ऐसा पहले भी हुआ है।|ऐसा पहले कभी नहीं हुआ।
""",
    "cancel": """
en=The customer wants to cancel the order.|The customer does not want to cancel the order.|I want to cancel my order.|I do not want to cancel my order.
de=Der Kunde will die Bestellung stornieren.|Der Kunde will die Bestellung nicht stornieren.|Ich will meine Bestellung stornieren.|Ich will meine Bestellung nicht stornieren.
fr=Le client veut annuler la commande.|Le client ne veut pas annuler la commande.|Je veux annuler ma commande.|Je ne veux pas annuler ma commande.
es=El cliente quiere cancelar el pedido.|El cliente no quiere cancelar el pedido.|Quiero cancelar mi pedido.|No quiero cancelar mi pedido.
ru=Клиент хочет отменить заказ.|Клиент не хочет отменять заказ.|Я хочу отменить заказ.|Я не хочу отменять заказ.
zh=客户想取消订单。|客户不想取消订单。|我想取消订单。|我不想取消订单。
ja=お客様は注文をキャンセルしたい。|お客様は注文をキャンセルしたくない。|注文をキャンセルしたいです。|注文はキャンセルしたくありません。
hi=ग्राहक ऑर्डर रद्द करना चाहता है।|ग्राहक ऑर्डर रद्द नहीं करना चाहता।|मैं अपना ऑर्डर रद्द करना चाहता हूँ।|मैं अपना ऑर्डर रद्द नहीं करना चाहता।
""",
    "premium": """
en=The customer is a premium member.|The customer is not a premium member.|I am a premium member.|I am not a premium member.
de=Der Kunde ist Premium-Mitglied.|Der Kunde ist kein Premium-Mitglied.|Ich bin Premium-Mitglied.|Ich bin kein Premium-Mitglied.
fr=Le client est membre premium.|Le client n'est pas membre premium.|Je suis membre premium.|Je ne suis pas membre premium.
es=El cliente es miembro premium.|El cliente no es miembro premium.|Soy miembro premium.|No soy miembro premium.
ru=Клиент — премиум-участник.|Клиент не премиум-участник.|Я премиум-участник.|Я не премиум-участник.
zh=客户是高级会员。|客户不是高级会员。|我是高级会员。|我不是高级会员。
ja=お客様はプレミアム会員だ。|お客様はプレミアム会員ではない。|私はプレミアム会員です。|私はプレミアム会員ではありません。
hi=ग्राहक प्रीमियम सदस्य है।|ग्राहक प्रीमियम सदस्य नहीं है।|मैं प्रीमियम सदस्य हूँ।|मैं प्रीमियम सदस्य नहीं हूँ।
""",
    "restart": """
en=The customer already tried restarting.|The customer has not tried restarting.|I already tried restarting.|I have not tried restarting yet.
de=Der Kunde hat bereits einen Neustart versucht.|Der Kunde hat noch keinen Neustart versucht.|Ich habe schon einen Neustart versucht.|Einen Neustart habe ich noch nicht versucht.
fr=Le client a déjà essayé de redémarrer.|Le client n'a pas essayé de redémarrer.|J'ai déjà essayé de redémarrer.|Je n'ai pas encore essayé de redémarrer.
es=El cliente ya intentó reiniciar.|El cliente no ha intentado reiniciar.|Ya intenté reiniciar.|Todavía no he intentado reiniciar.
ru=Клиент уже пробовал перезагрузку.|Клиент не пробовал перезагрузку.|Я уже пробовал перезагрузить.|Я ещё не пробовал перезагрузить.
zh=客户已经尝试过重启。|客户还没有尝试重启。|我已经试过重启了。|我还没试过重启。
ja=お客様はすでに再起動を試した。|お客様はまだ再起動を試していない。|もう再起動は試しました。|まだ再起動は試していません。
hi=ग्राहक पहले ही रीस्टार्ट करके देख चुका है।|ग्राहक ने अभी तक रीस्टार्ट नहीं किया है।|मैंने रीस्टार्ट करके देख लिया है।|मैंने अभी तक रीस्टार्ट नहीं किया।
""",
}

FACTS: dict[str, dict[str, Fact]] = {
    fid: {lang: Fact(fid, lang, *items) for lang, items in _parse_per_lang(table, 4).items()}
    for fid, table in _FACT_TABLE.items()
}
